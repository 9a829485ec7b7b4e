//! Round trip of a `bash` tool call running `true` through the whole tools pipeline: argument
//! parsing and validation, pre-execute, guards, the body (spawn, wait, drain, format), rendering,
//! post-execute and the result notification. Prints min / median / p90 / max over
//! `DSH_BENCH_RUNS` runs (default 200) after 20 warm-up runs.
//!
//! `cargo bench -p dsh-tool-bash --bench roundtrip`

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use dsh_bash_local::LocalShellPlugin;
use dsh_kernel::{Kernel, PluginRegistry};
use dsh_tool_bash::BashToolPlugin;
use dsh_tools::{ToolRequest, Tools, ToolsPlugin};
use serde_json::json;

fn main() {
    let runs: usize = std::env::var("DSH_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut samples = runtime.block_on(async {
        let mut registry = PluginRegistry::new();
        registry
            .register::<ToolsPlugin>()
            .register::<LocalShellPlugin>()
            .register::<BashToolPlugin>();
        let kernel = Kernel::new(registry);
        let bash = kernel.mount("tool-bash", json!({})).unwrap();
        kernel.mount("tools", json!({})).unwrap();
        kernel.mount("bash-local", json!({})).unwrap();
        bash.ready().await.unwrap();
        let tools = kernel.root().get::<dyn Tools>().unwrap();
        let cwd = std::env::temp_dir();
        let args = r#"{"command":"true","description":"Run true"}"#;
        let call =
            |i: usize| ToolRequest::new(format!("call-{i}"), "bash", args, "bench", cwd.clone());
        for i in 0..20 {
            let result = tools.execute(call(i)).await;
            assert!(!result.is_error, "{}", result.text());
        }
        let mut samples: Vec<Duration> = Vec::with_capacity(runs);
        for i in 0..runs {
            let start = Instant::now();
            let result = tools.execute(call(i)).await;
            samples.push(start.elapsed());
            assert_eq!(result.text(), "(no output)");
        }
        kernel.dispose().await;
        samples
    });
    samples.sort();
    let pick = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    println!(
        "bash tool call of `true` through the pipeline ({} runs): min {:?}  median {:?}  p90 {:?}  max {:?}",
        samples.len(),
        pick(0.0),
        pick(0.5),
        pick(0.9),
        pick(1.0)
    );
}
