//! `--only steps`: the per-step figures of issue 33 alone, measured as the full plan measures
//! them: the 20-step bash scenario (peak RSS, harness overhead per step), the same scenario over
//! 200 steps (its per-step overhead settles over many steps), and the bash spawn round trip
//! after a long history (large / small), its history sized as the full plan sizes it.

use std::path::Path;

use anyhow::Result;

use crate::figures::{Plan, ScenarioRuns, median_of, spawn_history};
use crate::report::Row;
use crate::resume::{self, Generated};
use crate::rows::{scenario_rows, spawn_rows};
use crate::scenario::{Scenario, Variant};
use crate::spawn;

/// The rows of the `steps` group.
pub fn rows(dsh: &Path, quick: bool, iterations: u32, rows: &mut Vec<Row>) -> Result<()> {
    let plan = Plan::new(quick, iterations);
    let mut bash_ms = Vec::new();
    for _ in 0..5 {
        let start = std::time::Instant::now();
        let out = std::process::Command::new("bash")
            .args(["-c", "echo step-1"])
            .stdin(std::process::Stdio::null())
            .output()?;
        bash_ms.push(start.elapsed().as_secs_f64() * 1e3);
        anyhow::ensure!(out.status.success(), "bash -c 'echo step-1' failed");
    }
    let bash_ms = median_of(&bash_ms);
    let long_steps = if quick { 20 } else { 200 };
    for steps in [if quick { 3 } else { 20 }, long_steps] {
        let scenario = Scenario::new("bash", Variant::Bash, steps);
        eprintln!(
            "dsh-bench: scenario bash ({steps} steps) ×{}",
            plan.iterations
        );
        let runs = (0..plan.iterations)
            .map(|_| scenario.run(dsh))
            .collect::<Result<Vec<_>>>()?;
        scenario_rows(rows, &ScenarioRuns { scenario, runs }, bash_ms);
    }
    eprintln!(
        "dsh-bench: resume of a {}-event session (sizes the spawn probe's history)",
        plan.resume_large_events
    );
    let large = Generated::new(dsh, plan.resume_large_events)?;
    let resume_large = vec![resume::run(dsh, &large)?];
    let events = spawn_history(&plan, &resume_large);
    let owned;
    let history = if events == large.events {
        &large
    } else {
        drop(large);
        owned = Generated::new(dsh, events)?;
        &owned
    };
    eprintln!(
        "dsh-bench: bash spawn probe, fresh and after resuming {events} events, interleaved ×{}",
        plan.iterations
    );
    let (mut small, mut big) = (Vec::new(), Vec::new());
    for _ in 0..plan.iterations {
        small.push(spawn::run(dsh, &plan.spawn, None)?);
        big.push(spawn::run(dsh, &plan.spawn, Some(history))?);
    }
    spawn_rows(rows, &small, &big);
    Ok(())
}
