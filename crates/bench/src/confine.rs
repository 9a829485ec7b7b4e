//! Sandbox confinement overhead per bash call: the same spawn probe (a warm-up step, then
//! pairs of steps: A runs one `true` call, B runs it plus `calls` more) under the default
//! `workspace-write` sandbox (bwrap, or Landlock without it) and under
//! `--sandbox danger-full-access` (unconfined), interleaved. Per pair, (gap B − gap A) /
//! calls is the cost of one more call; the confined median minus the unconfined median is
//! what confinement adds per call (budget: under 5 ms). Confined calls reuse a warm sandbox
//! (the default); a third run turns warm sandboxes off (`bash-local` `warmSandboxes: 0`, a
//! fresh `bwrap` per call: the figure before warm sandboxes).

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use dsh_testkit::{Completion, RecordedRequest};
use serde::Serialize;

use crate::figures::median_of;
use crate::report::{Group, Row};
use crate::run::{World, run_dsh};

/// Per-call figures of one run.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfineRun {
    /// The `--sandbox` mode of the run.
    pub mode: String,
    /// Whether warm sandboxes were turned off (a new confinement per call).
    #[serde(default)]
    pub cold: bool,
    /// Per pair: (gap B − gap A) / calls, ms.
    pub per_call_ms: Vec<f64>,
}

fn replies(pairs: usize, calls: usize) -> Vec<dsh_testkit::Reply> {
    let args =
        serde_json::json!({ "command": "true", "description": "Confinement probe" }).to_string();
    let mut out = vec![
        Completion::new()
            .tool_call_with_id("call_00_benchconfinewarmup", "bash", &args)
            .reply(),
    ];
    for p in 0..pairs {
        for b in 0..2 {
            let n = if b == 1 { 1 + calls } else { 1 };
            let mut c = Completion::new();
            for i in 0..n {
                c = c.tool_call_with_id(
                    &format!("call_{i:02}_benchconfine{p:03}{b}"),
                    "bash",
                    &args,
                );
            }
            out.push(c.reply());
        }
    }
    out.push(Completion::new().text("Confinement probe done.").reply());
    out
}

/// One run under `mode` (`cold`: warm sandboxes off).
pub fn run(dsh: &Path, mode: &str, cold: bool, pairs: usize, calls: usize) -> Result<ConfineRun> {
    let world = World::new()?;
    world.server.push_all(replies(pairs, calls));
    let steps = pairs * 2 + 1;
    let patch = world.home.path().join("cold.yaml");
    std::fs::write(
        &patch,
        "plugins:\n  - id: bash-local\n    name: bash-local\n    config:\n      warmSandboxes: 0\n",
    )
    .context("writing the cold patch")?;
    let patch = patch.to_string_lossy().into_owned();
    let mut args = vec!["exec", "--sandbox", mode];
    if cold {
        args.extend(["--patch", patch.as_str()]);
    }
    args.push("Run the confinement probe");
    run_dsh(dsh, &world, &args, false).context("the confinement probe run")?;
    let reqs: Vec<RecordedRequest> = world
        .server
        .wait_for_finished_blocking(steps + 1, Duration::from_secs(10))
        .context("the confinement probe: a response never ended")?;
    ensure!(
        reqs.len() == steps + 1 && reqs.iter().all(|r| r.status == 200),
        "the confinement probe: {} requests (expected {})",
        reqs.len(),
        steps + 1
    );
    let gap = |k: usize| -> Result<f64> {
        let done = reqs[k].finished_at.context("a response never finished")?;
        Ok(reqs[k + 1]
            .arrived_at
            .saturating_duration_since(done)
            .as_secs_f64()
            * 1e3)
    };
    let mut per_call_ms = Vec::new();
    for p in 0..pairs {
        per_call_ms.push((gap(2 * p + 2)? - gap(2 * p + 1)?) / calls.max(1) as f64);
    }
    Ok(ConfineRun {
        mode: mode.to_owned(),
        cold,
        per_call_ms,
    })
}

/// Interleaved runs, confined and unconfined.
pub fn runs(dsh: &Path, iterations: u32, quick: bool) -> Result<Vec<ConfineRun>> {
    let (pairs, calls) = if quick { (2, 8) } else { (4, 16) };
    let mut out = Vec::new();
    for _ in 0..iterations {
        out.push(run(dsh, "workspace-write", false, pairs, calls)?);
        out.push(run(dsh, "workspace-write", true, pairs, calls)?);
        out.push(run(dsh, "danger-full-access", false, pairs, calls)?);
    }
    Ok(out)
}

/// The rows: per-call cost in both modes, and the difference against the 5 ms budget.
pub fn rows(rows: &mut Vec<Row>, runs: &[ConfineRun]) {
    let per = |mode: &str, cold: bool| -> Vec<f64> {
        runs.iter()
            .filter(|r| r.mode == mode && r.cold == cold)
            .map(|r| median_of(&r.per_call_ms))
            .collect()
    };
    let confined = per("workspace-write", false);
    let cold = per("workspace-write", true);
    let unconfined = per("danger-full-access", false);
    let minus = |a: &[f64]| -> Vec<f64> { a.iter().zip(&unconfined).map(|(c, u)| c - u).collect() };
    let overhead = minus(&confined);
    let cold_overhead = minus(&cold);
    let mut g = Group::new(rows, "sandbox confinement (`true` bash calls)");
    g.info(
        "one more call, workspace-write (confined)",
        &confined,
        "ms",
        2,
    );
    g.info(
        "one more call, workspace-write, warm sandboxes off (a new bwrap per call)",
        &cold,
        "ms",
        2,
    );
    g.info(
        "confinement overhead per bash call, warm sandboxes off",
        &cold_overhead,
        "ms",
        2,
    );
    g.info(
        "one more call, danger-full-access (unconfined)",
        &unconfined,
        "ms",
        2,
    );
    g.limit(
        "confinement overhead per bash call",
        &overhead,
        "ms",
        2,
        5.0,
    );
}
