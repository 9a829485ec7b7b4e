//! The prompt cost of the tool set: bytes of the tool schemas the first request declares with
//! every tool enabled (`web_search` configured too), against the exact 12 KB budget (the original's
//! 25 tools take 19.7 KB); and their stability: two runs declare byte-identical schemas in
//! the same canonical order.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use dsh_testkit::Completion;
use serde_json::Value;

use crate::report::{Group, Row};
use crate::run::{World, run_dsh};

/// The budget of the whole tool-schema set, bytes.
const BUDGET: usize = 12 * 1024;

/// A patch that enables every optional tool (`web_search` takes its "key" from `HOME`, which
/// every run has; the endpoint is never called).
const EVERY_TOOL: &str = "plugins:\n  - id: tool-web\n    name: tool-web\n    config:\n      search:\n        endpoint: http://127.0.0.1:9/search\n        apiKeyEnv: HOME\n";

/// The `tools` array of the first request of one `dsh exec`.
fn declared_tools(dsh: &Path) -> Result<Vec<Value>> {
    let world = World::new()?;
    let patch = world.home.path().join("every-tool.yaml");
    std::fs::write(&patch, EVERY_TOOL).context("writing the tool patch")?;
    world.server.push(Completion::new().text("ok").reply());
    let patch_arg = patch.display().to_string();
    run_dsh(
        dsh,
        &world,
        &["exec", "--patch", &patch_arg, "Hello"],
        false,
    )
    .context("the tool-set probe run")?;
    let reqs = world
        .server
        .wait_for_finished_blocking(1, Duration::from_secs(10))
        .context("the tool-set probe: the response never ended")?;
    let body: Value = serde_json::from_slice(&reqs[0].body).context("the request body")?;
    let tools = body["tools"]
        .as_array()
        .cloned()
        .context("the request declares no tools")?;
    Ok(tools)
}

fn name(t: &Value) -> &str {
    t["function"]["name"].as_str().unwrap_or("")
}

/// The rows of the group.
pub fn rows(dsh: &Path, rows: &mut Vec<Row>) -> Result<()> {
    let first = declared_tools(dsh)?;
    let second = declared_tools(dsh)?;
    ensure!(
        first.iter().any(|t| name(t) == "web_search"),
        "web_search was not declared with its configuration"
    );
    let bytes = serde_json::to_string(&first)?.len();
    let names: Vec<&str> = first.iter().map(name).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    let mut g = Group::new(rows, "tool set");
    // An exact budget: the set is deterministic bytes, so any run over 12 KB fails
    // (`--report-only` included), as the "keep the whole set under 12 KB" asks.
    g.exact(
        &format!("tool schema bytes, all {} tools enabled", first.len()),
        &format!("at most {BUDGET} B"),
        &format!("{bytes} B"),
        bytes <= BUDGET,
    );
    let mut largest: Vec<(usize, &str)> = first
        .iter()
        .map(|t| (serde_json::to_string(t).map_or(0, |s| s.len()), name(t)))
        .collect();
    largest.sort_unstable_by(|a, b| b.cmp(a));
    let top: Vec<String> = largest.iter().map(|(b, n)| format!("{n} {b} B")).collect();
    g.text("schema bytes per tool, largest first", &top.join(", "));
    g.exact(
        "tool order: canonical (lexicographic) and byte-identical across runs",
        "identical",
        if first == second && names == sorted {
            "identical"
        } else {
            "differs"
        },
        first == second && names == sorted,
    );
    Ok(())
}
