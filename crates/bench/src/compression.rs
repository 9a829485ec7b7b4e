//! Session log compression (issue 21): bytes per step of the same scripted run written plain
//! (`compression: none`) and as zstd frames (the default, as the original's), and `dsh exec --resume` of a
//! 10k-event log stored as zstd against the same log stored plain.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use dsh_testkit::Completion;

use crate::report::{Group, Row};
use crate::resume::Generated;
use crate::run::{World, run_dsh, session_log};
use crate::scenario::{Scenario, Variant};

const PLAIN_CONFIG: &str = "plugins:\n  - id: session-jsonl\n    name: session-jsonl\n    config:\n      compression: none\n";
const STEPS: usize = 20;

/// Log bytes per model step of the 20-step bash scenario, with the `session-jsonl` row
/// configured by `config` (none: the built-in default).
fn bytes_per_step(dsh: &Path, config: Option<&str>) -> Result<(f64, bool)> {
    let world = World::new()?;
    if let Some(c) = config {
        std::fs::write(world.home.path().join("dsh.yaml"), c).context("writing dsh.yaml")?;
    }
    let scenario = Scenario::new("bash", Variant::Bash, STEPS);
    world.server.push_all(scenario.replies());
    run_dsh(dsh, &world, &["exec", "Run the steps."], false)?;
    let log = session_log(world.home.path())?;
    let zstd = log.extension().is_some_and(|x| x == "zstd");
    let bytes = std::fs::metadata(&log)?.len();
    Ok((bytes as f64 / (STEPS + 1) as f64, zstd))
}

/// Rewrites the generated plain log as zstd frames: the header alone, then one frame per step
/// (cut after each `step/end`, about what dsh's flushes write).
fn to_zstd(g: &Generated) -> Result<PathBuf> {
    g.restore()?;
    let text = std::fs::read_to_string(&g.log)?;
    ensure!(!text.is_empty(), "empty generated log");
    let out = dsh_session_jsonl::zstd::encode_per_step(&text);
    let path = PathBuf::from(format!("{}.zstd", g.log.display()));
    std::fs::write(&path, &out)?;
    std::fs::remove_file(&g.log)?;
    Ok(path)
}

/// Spawn → first request of `dsh exec --resume`, and the `sessions show` wall time, ms.
fn resume_once(dsh: &Path, g: &Generated) -> Result<(f64, f64)> {
    let world = &g.world;
    let show = run_dsh(dsh, world, &["sessions", "show", g.id()], false)?;
    world
        .server
        .push(Completion::new().text("Resumed.").reply());
    let first = world.server.request_count();
    let out = run_dsh(dsh, world, &["exec", "--resume", g.id(), "Continue"], false)?;
    let reqs = world
        .server
        .wait_for_requests_blocking(first + 1, Duration::from_secs(5))
        .context("the resumed run's request never arrived")?;
    let ms = reqs[first]
        .arrived_at
        .duration_since(out.spawned_at)
        .as_secs_f64()
        * 1e3;
    Ok((ms, show.wall.as_secs_f64() * 1e3))
}

/// Adds the compression rows.
pub fn rows(dsh: &Path, quick: bool, iterations: u32, rows: &mut Vec<Row>) -> Result<()> {
    let (mut plain, mut zstd) = (Vec::new(), Vec::new());
    for _ in 0..iterations.min(3) {
        let (p, pz) = bytes_per_step(dsh, Some(PLAIN_CONFIG))?;
        let (z, zz) = bytes_per_step(dsh, None)?;
        if pz || !zz {
            bail!(
                "compression setting not applied (`none` gave zstd: {pz}, default gave zstd: {zz})"
            );
        }
        plain.push(p);
        zstd.push(z);
    }
    let mut g = Group::new(rows, format!("session log compression: {STEPS} bash steps"));
    g.info("log bytes per step, `compression: none`", &plain, "B", 0);
    g.info(
        "log bytes per step, `compression: zstd` (default)",
        &zstd,
        "B",
        0,
    );
    let events = if quick { 2_000 } else { 10_000 };
    let gen_log = Generated::new(dsh, events)?;
    let (mut plain_ms, mut zstd_ms, mut plain_show, mut zstd_show) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..iterations {
        gen_log.restore()?;
        let (r, s) = resume_once(dsh, &gen_log)?;
        plain_ms.push(r);
        plain_show.push(s);
        let z = to_zstd(&gen_log)?;
        let (r, s) = resume_once(dsh, &gen_log)?;
        zstd_ms.push(r);
        zstd_show.push(s);
        std::fs::remove_file(&z)?;
    }
    gen_log.restore()?;
    let mut g = Group::new(
        rows,
        format!("resume of a {events}-event log, plain vs zstd"),
    );
    g.info("plain: spawn → first request", &plain_ms, "ms", 1);
    g.limit("zstd: spawn → first request", &zstd_ms, "ms", 1, 50.0);
    g.info("plain: `sessions show`", &plain_show, "ms", 1);
    g.info("zstd: `sessions show`", &zstd_show, "ms", 1);
    Ok(())
}
