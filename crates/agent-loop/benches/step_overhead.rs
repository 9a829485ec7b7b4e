//! Harness overhead per step (issue 6, item 6).
//!
//! A 20-step run in process: each step is one call to a trivial in-process tool, then a final
//! text answer. The real DeepSeek adapter talks HTTP to the testkit `MockServer` on 127.0.0.1,
//! which answers instantly. For step K the overhead is the time from the end of mock response K
//! (`RecordedRequest::finished_at`) to the arrival of request K+1 (`arrived_at`), minus the
//! tool's own time. Reported: median, min and max over every step of ~10 runs, and the range of
//! the per-run medians. Budget: 2 ms median.
//!
//! Two variants: in-memory sessions (the loop alone), and JSONL persistence in a tempdir (the
//! loop flushes before every tool dispatch and at the turn end, so this includes an fsync per
//! step).
//!
//! `cargo bench -p dsh-agent-loop --bench step_overhead`. Without `--bench` (e.g. under
//! `cargo test --all-targets`) it runs one short smoke run of each variant.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_agent::{AgentOptions, Agents, AgentsPlugin, CreateAgent};
use dsh_agent_loop::{AgentLoopConfig, AgentLoopPlugin};
use dsh_kernel::{EmptyConfig, Kernel, PluginRegistry};
use dsh_llm::Message;
use dsh_llm::service::LlmPlugin;
use dsh_llm_deepseek::{DeepSeekPlugin, install_crypto_provider};
use dsh_session::SessionsPlugin;
use dsh_session_jsonl::{JsonlConfig, JsonlPlugin};
use dsh_testkit::{Completion, MockServer};
use dsh_tools::{FnTool, ToolOutput, Tools, ToolsPlugin};
use parking_lot::Mutex;
use serde_json::json;

const STEPS: usize = 20;
const BUDGET: Duration = Duration::from_millis(2);

/// Start and end of every tool execution, in call order.
type ToolTimes = Arc<Mutex<Vec<(Instant, Instant)>>>;

async fn kernel(server: &MockServer, store: Option<&std::path::Path>) -> Kernel {
    let kernel = Kernel::new(PluginRegistry::new());
    let deepseek = serde_json::from_value(json!({
        "baseUrl": server.base_url(),
        "apiKey": "sk-bench",
        "thinking": "disabled",
    }))
    .unwrap();
    let mut handles = vec![
        kernel.mount_plugin::<LlmPlugin>(EmptyConfig {}).unwrap(),
        kernel.mount_plugin::<DeepSeekPlugin>(deepseek).unwrap(),
        kernel.mount_plugin::<AgentsPlugin>(EmptyConfig {}).unwrap(),
        kernel
            .mount_plugin::<SessionsPlugin>(EmptyConfig {})
            .unwrap(),
        kernel
            .mount_plugin::<ToolsPlugin>(Default::default())
            .unwrap(),
        kernel
            .mount_plugin::<AgentLoopPlugin>(AgentLoopConfig::default())
            .unwrap(),
    ];
    if let Some(root) = store {
        handles.push(
            kernel
                .mount_plugin::<JsonlPlugin>(JsonlConfig {
                    root: Some(root.to_path_buf()),
                    ..Default::default()
                })
                .unwrap(),
        );
    }
    for h in handles {
        h.ready().await.unwrap();
    }
    kernel
}

fn noop_tool(times: ToolTimes) -> FnTool {
    FnTool::new(
        "noop",
        "Does nothing.",
        json!({"type": "object", "properties": {}}),
        move |_ctx, _args| {
            let times = times.clone();
            async move {
                let start = Instant::now();
                let out = ToolOutput::text("ok");
                times.lock().push((start, Instant::now()));
                Ok(out)
            }
        },
    )
}

/// One 20-step run; returns the per-step overheads.
async fn run(kernel: &Kernel, server: &MockServer, times: &ToolTimes, cwd: &str) -> Vec<Duration> {
    let first = server.request_count();
    times.lock().clear();
    for k in 0..STEPS {
        server.push(
            Completion::new()
                .tool_call_with_id(&format!("call_{first}_{k}"), "noop", "{}")
                .reply(),
        );
    }
    server.push(Completion::new().text("done").reply());
    let agents = kernel.root().get::<dyn Agents>().unwrap();
    let agent = agents
        .create(
            &kernel.root(),
            CreateAgent {
                options: AgentOptions {
                    provider: Some("deepseek".into()),
                    cwd: cwd.into(),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    agent.followup(Message::user_text("", "go")).unwrap();
    tokio::time::timeout(Duration::from_secs(60), agent.when_idle())
        .await
        .expect("the run did not finish");
    let requests = server.wait_for_finished(first + STEPS + 1).await;
    let ends = agent.session().events();
    let end = ends.last().unwrap();
    assert_eq!(end.kind(), "turn/end");
    assert_eq!(
        end.data()["reason"]["kind"],
        "completed",
        "{:?}",
        end.data()
    );
    agent.dispose().await;
    let requests = &requests[first..];
    let tools = times.lock().clone();
    assert_eq!(tools.len(), STEPS);
    (0..STEPS)
        .map(|k| {
            let finished = requests[k].finished_at.expect("response finished");
            let gap = requests[k + 1].arrived_at.duration_since(finished);
            let (start, end) = tools[k];
            gap.saturating_sub(end.duration_since(start))
        })
        .collect()
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

async fn variant(name: &str, runs: usize, persist: bool) -> Duration {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kernel = kernel(&server, persist.then(|| dir.path())).await;
    let times: ToolTimes = Arc::default();
    kernel
        .root()
        .get::<dyn Tools>()
        .unwrap()
        .register(&kernel.root(), Arc::new(noop_tool(times.clone())))
        .unwrap();
    let cwd = dir.path().to_string_lossy().into_owned();
    // Warm-up: connection pool, allocator, lazy statics.
    run(&kernel, &server, &times, &cwd).await;
    let mut all = Vec::new();
    let mut medians = Vec::new();
    for _ in 0..runs {
        let mut steps = run(&kernel, &server, &times, &cwd).await;
        medians.push(median(&mut steps));
        all.extend(steps);
    }
    kernel.dispose().await;
    let m = median(&mut all);
    medians.sort();
    println!(
        "{name:<22} steps {:>4}  median {}  min {}  max {}  per-run medians {} .. {}",
        all.len(),
        ms(m),
        ms(all[0]),
        ms(all[all.len() - 1]),
        ms(medians[0]),
        ms(medians[medians.len() - 1]),
    );
    m
}

fn main() {
    install_crypto_provider();
    let full = std::env::args().any(|a| a == "--bench");
    let runs = if full { 10 } else { 1 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        println!(
            "harness overhead per step ({STEPS}-step runs x {runs}, budget {BUDGET:?} median)"
        );
        let memory = variant("in-memory sessions", runs, false).await;
        variant("jsonl + fsync", runs, true).await;
        if full && memory > BUDGET {
            println!("OVER BUDGET: median {} > {}", ms(memory), ms(BUDGET));
            std::process::exit(1);
        }
    });
}
