//! Workflow scripts (`workflow`): what a run costs before its script does anything (the
//! QuickJS engine's start, in-process), and whether a fan-out is concurrent end to end: a
//! workflow of five children answering after 40, 80, 120, 160 and 200 ms against the same
//! workflow with only the 200 ms child. The difference is what fanning out costs beyond the
//! slowest child (five child sessions created and disposed side by side, the joins).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use dsh_testkit::Completion;

use crate::report::{Group, Row};
use crate::run::{World, run_dsh};
use crate::subagent::last_message;

/// The delays of the fan-out's children, ms (the slowest last).
const FAN_OUT: [u64; 5] = [40, 80, 120, 160, 200];

/// The script: one child per `args.delays` entry, all started before any is awaited.
const SCRIPT: &str = "const runs = args.delays.map((d, i) => agent({ prompt: `child ${i} ${d}`, \
label: `child ${i}` })); const results = await Promise.all(runs); \
return results.map((r) => r.text);";

/// The wall time of one `workflow` call with children answering after `delays` ms: from
/// the end of the parent's response that calls it to the parent's request that carries its
/// result, ms.
fn wall(dsh: &Path, delays: &[u64]) -> Result<f64> {
    let world = World::new()?;
    let args = serde_json::json!({
        "script": SCRIPT,
        "meta": {"name": "fan-out probe", "description": "children side by side"},
        "args": {"delays": delays},
    })
    .to_string();
    world.server.set_responder(move |req| {
        let (role, last) = last_message(req);
        if role == "tool" {
            return Completion::new().text("Workflow probe done.").reply();
        }
        if last == "Run the workflow probe" {
            return Completion::new().tool_call("workflow", &args).reply();
        }
        // A child: `child <i> <delay>`.
        let delay = last
            .strip_prefix("child ")
            .and_then(|rest| rest.split(' ').nth(1))
            .and_then(|d| d.parse().ok())
            .unwrap_or(0);
        Completion::new()
            .text(&format!("{last} done"))
            .reply()
            .delay_head(Duration::from_millis(delay))
    });
    // `workflow` is not in the headless preset (the tool-set budget): a patch row mounts it.
    let patch = world.home.path().join("workflow.yaml");
    std::fs::write(
        &patch,
        "plugins:\n  - id: tool-workflow\n    name: tool-workflow\n",
    )
    .context("writing the workflow patch")?;
    let patch = patch.to_string_lossy().into_owned();
    run_dsh(
        dsh,
        &world,
        &["exec", "--patch", &patch, "Run the workflow probe"],
        false,
    )
    .context("the workflow probe run")?;
    let reqs = world.server.requests();
    let first = reqs
        .iter()
        .find(|r| last_message(r).1 == "Run the workflow probe")
        .context("the workflow probe: no first request")?;
    let after = reqs
        .iter()
        .find(|r| last_message(r).0 == "tool")
        .context("the workflow probe: the parent never got the workflow's result")?;
    let children = reqs
        .iter()
        .filter(|r| last_message(r).1.starts_with("child "))
        .count();
    anyhow::ensure!(
        children == delays.len(),
        "the workflow probe: {children} children asked (expected {})",
        delays.len()
    );
    let done = first
        .finished_at
        .context("the workflow probe: the first response never finished")?;
    Ok(after
        .arrived_at
        .saturating_duration_since(done)
        .as_secs_f64()
        * 1e3)
}

/// The rows of the group.
pub fn rows(dsh: &Path, quick: bool, iterations: u32, rows: &mut Vec<Row>) -> Result<()> {
    let mut g = Group::new(rows, "workflow");
    let limits = || dsh_tool_workflow::engine::EngineLimits {
        deadline: Instant::now() + Duration::from_secs(10),
        max_wall_ms: 10_000,
        max_memory_bytes: 64 << 20,
        max_stack_bytes: 1 << 20,
    };
    let mut starts = Vec::new();
    for _ in 0..(iterations * 4).max(10) {
        let limits = limits();
        let t = Instant::now();
        dsh_tool_workflow::engine::probe(&limits).context("the workflow engine probe")?;
        starts.push(t.elapsed().as_secs_f64() * 1e3);
    }
    g.limit(
        "engine start: QuickJS runtime and context, the script API, a script that returns",
        &starts,
        "ms",
        2,
        20.0,
    );
    let runs = if quick { 1 } else { iterations };
    let mut extra = Vec::new();
    let mut fan = Vec::new();
    for _ in 0..runs {
        let lone = wall(dsh, &FAN_OUT[FAN_OUT.len() - 1..])?;
        let five = wall(dsh, &FAN_OUT)?;
        fan.push(five);
        extra.push(five - lone);
    }
    g.info(
        "fan-out of 5 children (40–200 ms): workflow wall time",
        &fan,
        "ms",
        1,
    );
    g.limit_as(
        "fan-out of 5 children beyond the same workflow with only its slowest (200 ms) child",
        &extra,
        "ms",
        2,
        10.0,
        "under 10 ms (median)",
    );
    Ok(())
}
