//! Bash spawn round trip at a small and at a large harness RSS.
//!
//! One `dsh exec` turn of a warm-up step, then `pairs` pairs of steps: step A runs one bash call, [`RSS_COMMAND`]
//! (dsh's `VmRSS` at that moment, printed by its own child); step B runs the same call plus
//! `calls` bash calls `true`. Bash calls are exclusive (one at a time), so the step gap of B minus
//! the gap of A, over `calls`, is the cost of one more `true` call as the harness sees it: spawn,
//! wait, result, log append. Request serialisation, which grows with the history, is in both gaps
//! and cancels out. The large-RSS run does the same after resuming a long generated session.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use dsh_testkit::{Completion, RecordedRequest};
use serde::Serialize;

use crate::resume::Generated;
use crate::run::{World, run_dsh, session_log};
use crate::scenario::{RSS_COMMAND, content_text, read_events, vm_rss_kib};

/// Figures from one spawn run.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpawnRun {
    /// Events in the resumed log before the run (0: a fresh session).
    pub resumed_events: usize,
    /// dsh's `VmRSS` at each step A, KiB (printed by the step's own bash child).
    pub harness_rss_kib: Vec<u64>,
    /// Peak RSS of the run, MiB.
    pub peak_rss_mib: f64,
    /// Per pair: (gap B − gap A) / calls, ms.
    pub per_call_ms: Vec<f64>,
    /// Body size of the last request, bytes.
    pub last_request_bytes: usize,
}

/// How many steps and calls.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpawnPlan {
    /// Pairs of steps (A, B).
    pub pairs: usize,
    /// Extra `true` calls in step B.
    pub calls: usize,
    /// Harness RSS the large run aims at, MB.
    pub target_rss_mb: f64,
}

fn call(id: &str, command: &str) -> (String, String) {
    let args = serde_json::json!({ "command": command, "description": "Spawn probe" });
    (id.to_owned(), args.to_string())
}

fn replies(plan: &SpawnPlan) -> Vec<dsh_testkit::Reply> {
    // A warm-up step first: the turn's first bash call pays one-time setup.
    let (id, args) = call("call_00_benchspawnwarmup", "true");
    let mut out = vec![
        Completion::new()
            .tool_call_with_id(&id, "bash", &args)
            .reply(),
    ];
    for p in 0..plan.pairs {
        for b in 0..2 {
            let mut calls = vec![call(
                &format!("call_00_benchspawn{p:03}{b}rss"),
                RSS_COMMAND,
            )];
            if b == 1 {
                for i in 0..plan.calls {
                    calls.push(call(
                        &format!("call_{:02}_benchspawn{p:03}{b}true{i:03}", i + 1),
                        "true",
                    ));
                }
            }
            let mut c = Completion::new();
            for (id, args) in &calls {
                c = c.tool_call_with_id(id, "bash", args);
            }
            out.push(c.reply());
        }
    }
    out.push(Completion::new().text("Spawn probe done.").reply());
    out
}

/// One run: a fresh session in a new world (`resume` `None`), or a resume of `resume`.
pub fn run(dsh: &Path, plan: &SpawnPlan, resume: Option<&Generated>) -> Result<SpawnRun> {
    let fresh_world;
    let (world, args, resumed_events) = match resume {
        Some(g) => {
            g.restore()?;
            (
                &g.world,
                vec!["exec", "--resume", g.id(), "Run the spawn probe"],
                g.events,
            )
        }
        None => {
            fresh_world = World::new()?;
            (&fresh_world, vec!["exec", "Run the spawn probe"], 0)
        }
    };
    let first = world.server.request_count();
    world.server.push_all(replies(plan));
    let steps = plan.pairs * 2 + 1;
    let out = run_dsh(dsh, world, &args, true).context("the spawn probe run")?;
    let reqs: Vec<RecordedRequest> = world
        .server
        .wait_for_finished_blocking(first + steps + 1, Duration::from_secs(10))
        .context("the spawn probe: a response never ended")?
        .split_off(first);
    ensure!(
        reqs.len() == steps + 1 && reqs.iter().all(|r| r.status == 200),
        "the spawn probe: {} requests (expected {}), statuses {:?}",
        reqs.len(),
        steps + 1,
        reqs.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    let gap = |k: usize| -> Result<f64> {
        let done = reqs[k]
            .finished_at
            .with_context(|| format!("response {} never finished", reqs[k].index))?;
        Ok(reqs[k + 1]
            .arrived_at
            .saturating_duration_since(done)
            .as_secs_f64()
            * 1e3)
    };
    let mut per_call_ms = Vec::new();
    for p in 0..plan.pairs {
        per_call_ms.push((gap(2 * p + 2)? - gap(2 * p + 1)?) / plan.calls.max(1) as f64);
    }
    let log = match resume {
        Some(g) => g.log.clone(),
        None => session_log(world.home.path())?,
    };
    let events = read_events(&log)?;
    let harness_rss_kib: Vec<u64> = events
        .iter()
        .filter(|e| e["type"] == "tool/result")
        .filter(|e| {
            e["data"]["message"]["toolCallId"]
                .as_str()
                .is_some_and(|id| id.ends_with("rss"))
        })
        .filter_map(|e| vm_rss_kib(&content_text(&e["data"]["message"]["content"])))
        .collect();
    Ok(SpawnRun {
        resumed_events,
        harness_rss_kib,
        peak_rss_mib: out
            .probe
            .map_or(f64::NAN, |p| p.max_rss_kib as f64 / 1024.0),
        per_call_ms,
        last_request_bytes: reqs.last().map_or(0, |r| r.body.len()),
    })
}
