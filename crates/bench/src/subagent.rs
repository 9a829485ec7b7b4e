//! Sub-agent delegation: the cost of a child beyond its model time. The parent's first
//! response calls `subagent` `children` times in one batch; each child answers with one text
//! response; the parent then answers. The mock answers at once, so the gap between the end of
//! the parent's first response and the arrival of its second request is the harness's own
//! time for creating, running and disposing the children (child model time is subtracted).
//! One child gives the per-child overhead; three show that a batch runs concurrently.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use dsh_testkit::{Completion, RecordedRequest};

use crate::report::{Group, Row};
use crate::run::{World, run_dsh};

/// (delegation gap, child model time) of one run, ms.
fn run(dsh: &Path, children: usize) -> Result<(f64, f64)> {
    let world = World::new()?;
    let mut first = Completion::new();
    for i in 0..children {
        let args = serde_json::json!({
            "description": format!("Bench child {i}"),
            "prompt": format!("Say child {i}")
        })
        .to_string();
        first = first.tool_call_with_id(&format!("call_{i:02}_benchsubagent"), "subagent", &args);
    }
    world.server.push(first.reply());
    for i in 0..children {
        world
            .server
            .push(Completion::new().text(&format!("child {i} done")).reply());
    }
    world
        .server
        .push(Completion::new().text("Delegation probe done.").reply());
    run_dsh(dsh, &world, &["exec", "Run the delegation probe"], false)
        .context("the delegation probe run")?;
    let total = children + 2;
    let reqs: Vec<RecordedRequest> = world
        .server
        .wait_for_finished_blocking(total, Duration::from_secs(10))
        .context("the delegation probe: a response never ended")?;
    ensure!(
        reqs.len() == total && reqs.iter().all(|r| r.status == 200),
        "the delegation probe: {} requests (expected {total})",
        reqs.len()
    );
    let done = reqs[0].finished_at.context("a response never finished")?;
    let gap = reqs[total - 1]
        .arrived_at
        .saturating_duration_since(done)
        .as_secs_f64()
        * 1e3;
    // Concurrent children overlap: the model time on the critical path is the longest one.
    let model = reqs[1..total - 1]
        .iter()
        .filter_map(|r| {
            r.finished_at
                .map(|f| f.saturating_duration_since(r.arrived_at))
        })
        .max()
        .unwrap_or_default()
        .as_secs_f64()
        * 1e3;
    Ok((gap, model))
}

/// Runs the probe (one child, then three) and adds its rows.
pub fn rows(dsh: &Path, iterations: u32, rows: &mut Vec<Row>) -> Result<()> {
    let (mut one, mut three, mut overhead) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..iterations {
        let (gap, model) = run(dsh, 1)?;
        one.push(gap);
        overhead.push(gap - model);
        three.push(run(dsh, 3)?.0);
    }
    let mut g = Group::new(
        rows,
        "sub-agents (`subagent` calls, mock answering at once)",
    );
    g.info("child overhead beyond its model time", &overhead, "ms", 2);
    g.info("delegation wall time, one child", &one, "ms", 2);
    g.info(
        "delegation wall time, three children in one batch",
        &three,
        "ms",
        2,
    );
    Ok(())
}
