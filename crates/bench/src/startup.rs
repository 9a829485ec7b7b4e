//! Startup of the default composition: `dsh exec` spawn → first request in a git repository,
//! and what each plugin's mount adds to it (the same run with that plugin's row disabled by a
//! `--patch` layer, interleaved with full runs; the difference of the medians), so a
//! regression names its plugin. With valgrind on the machine, the full plan also counts the
//! instructions of each run under callgrind (repeatable, unlike wall time on a shared
//! machine): the instructions each plugin adds to a one-turn `dsh exec`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use dsh_testkit::Completion;

use crate::report::{Group, Row};
use crate::run::{World, run_dsh_within};

/// How long a startup run may take before it is stopped (a composition that never starts).
const RUN_LIMIT: Duration = Duration::from_secs(20);

/// Spawn → first request budget of the default composition, ms (issue 33).
pub const FIRST_REQUEST_BUDGET_MS: f64 = 10.0;

/// The rows of the default composition measured alone: `(row id, plugin name)`. Rows whose
/// removal leaves a composition that still runs one turn; a pair that only works together is
/// one entry (`+`-joined ids).
pub const PLUGINS: &[(&str, &str)] = &[
    ("session-title", "session-title"),
    ("attachment-local", "attachment-local"),
    ("deepseek-anthropic", "anthropic"),
    ("anthropic", "anthropic"),
    ("openai-compatible", "openai-compatible"),
    ("llm-retry", "llm-retry"),
    ("context", "context"),
    ("hooks", "hooks"),
    ("tool-timeout", "tool-timeout"),
    ("fs-read-before-write", "fs-read-before-write"),
    ("sandbox+sandbox-context", "sandbox+sandbox-context"),
    ("tool-todo", "tool-todo"),
    ("tool-working-directory", "tool-working-directory"),
    ("plan-mode", "plan-mode"),
    ("tool-web", "tool-web"),
    ("tool-image", "tool-image"),
    ("approval", "approval"),
    ("mcp-resources", "mcp-resources"),
    ("subagents+tool-subagent", "subagents+tool-subagent"),
    ("jobs+tool-jobs", "jobs+tool-jobs"),
    ("tool-result-pruner", "tool-result-pruner"),
    ("compaction-basic", "compaction-basic"),
];

/// A `--patch` layer removing the rows of `entry` (`a+b`: both).
fn patch_text(ids: &str, names: &str) -> String {
    let mut out = String::from("plugins:\n");
    for (id, name) in ids.split('+').zip(names.split('+')) {
        out.push_str(&format!(
            "  - id: {id}\n    name: {name}\n    disabled: true\n"
        ));
    }
    out
}

/// A world whose working directory is a git repository (`git init`, else a bare `.git`).
fn repo_world() -> Result<World> {
    let world = World::new()?;
    let init = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&world.work)
        .status();
    if !matches!(init, Ok(s) if s.success()) {
        std::fs::create_dir_all(world.work.join(".git")).context("creating .git")?;
    }
    Ok(world)
}

/// The arguments of a one-turn run without `entry`'s rows (`None`: the whole composition),
/// writing the patch into the world's home.
fn args_without(world: &World, without: Option<(&str, &str)>) -> Result<Vec<String>> {
    let mut args = vec!["exec".to_owned()];
    if let Some((ids, names)) = without {
        let patch = world.home.path().join("startup-patch.yaml");
        std::fs::write(&patch, patch_text(ids, names)).context("writing the patch")?;
        args.push("--patch".into());
        args.push(patch.display().to_string());
    }
    args.push("Hello".into());
    Ok(args)
}

/// Spawn → first request, ms, of one `dsh exec` turn in a git repository.
fn first_request_ms(dsh: &Path, without: Option<(&str, &str)>) -> Result<f64> {
    let world = repo_world()?;
    world
        .server
        .push(Completion::new().text("Startup probe done.").reply());
    // Within a limit: a composition missing a row another one waits for may never start.
    let args = args_without(&world, without)?;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_dsh_within(dsh, &world, &args, RUN_LIMIT)
        .with_context(|| format!("the startup run without {without:?}"))?;
    let reqs = world
        .server
        .wait_for_finished_blocking(1, Duration::from_secs(10))
        .context("the startup run: the response never ended")?;
    ensure!(reqs.len() == 1, "the startup run: {} requests", reqs.len());
    Ok(reqs[0]
        .arrived_at
        .duration_since(out.spawned_at)
        .as_secs_f64()
        * 1e3)
}

/// Instructions of one `dsh exec` turn under callgrind (`None` without valgrind).
fn instructions(dsh: &Path, without: Option<(&str, &str)>) -> Result<Option<u64>> {
    if Command::new("valgrind").arg("--version").output().is_err() {
        return Ok(None);
    }
    let world = repo_world()?;
    world
        .server
        .push(Completion::new().text("Startup probe done.").reply());
    let mut args = vec![
        "--tool=callgrind".to_owned(),
        "--callgrind-out-file=/dev/null".to_owned(),
        dsh.display().to_string(),
    ];
    args.extend(args_without(&world, without)?);
    let valgrind = Path::new("valgrind");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_dsh_stderr(valgrind, &world, &args)?;
    let collected = out
        .lines()
        .find_map(|l| l.split("Collected :").nth(1))
        .and_then(|n| n.trim().parse().ok());
    match collected {
        Some(n) => Ok(Some(n)),
        None => bail!("callgrind printed no instruction count"),
    }
}

/// Runs `program args` in `world`'s environment and returns its stderr.
fn run_dsh_stderr(program: &Path, world: &World, args: &[&str]) -> Result<String> {
    let out = world
        .piped(program)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .args(args)
        .output()
        .with_context(|| format!("running {}", program.display()))?;
    ensure!(out.status.success(), "{} failed", program.display());
    Ok(String::from_utf8_lossy(&out.stderr).into_owned())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// The rows: the total against its budget, then one row per plugin.
pub fn rows(dsh: &Path, quick: bool, iterations: u32, rows: &mut Vec<Row>) -> Result<()> {
    let runs = if quick { 1 } else { iterations.max(5) };
    // Warm the page cache and the binary before timing.
    first_request_ms(dsh, None)?;
    // Rows the composition cannot run one turn without are reported as such and skipped.
    let mut usable = vec![true; PLUGINS.len()];
    let mut full = Vec::new();
    let mut without: Vec<Vec<f64>> = vec![Vec::new(); PLUGINS.len()];
    for _ in 0..runs {
        for (i, entry) in PLUGINS.iter().enumerate() {
            if i % 4 == 0 {
                full.push(first_request_ms(dsh, None)?);
            }
            if !usable[i] {
                continue;
            }
            match first_request_ms(dsh, Some(*entry)) {
                Ok(ms) => without[i].push(ms),
                Err(_) => usable[i] = false,
            }
        }
    }
    let full_median = median(&mut full.clone());
    let mut g = Group::new(rows, "startup: default composition in a git repository");
    g.limit(
        "`dsh exec` spawn → first request",
        &full,
        "ms",
        2,
        FIRST_REQUEST_BUDGET_MS,
    );
    let mut sum = 0.0;
    for (((ids, _), samples), ok) in PLUGINS.iter().zip(&mut without).zip(&usable) {
        if !ok {
            g.text(
                &format!("mount of `{ids}` adds"),
                "n/a: `dsh exec` does not run one turn without it",
            );
            continue;
        }
        let added: Vec<f64> = samples.iter().map(|w| full_median - w).collect();
        sum += full_median - median(samples);
        g.info(&format!("mount of `{ids}` adds"), &added, "ms", 2);
    }
    g.text(
        "sum of the per-plugin figures",
        &format!("{sum:.2} ms of {full_median:.2} ms"),
    );
    if !quick && let Some(base) = instructions(dsh, None)? {
        let mut g = Group::new(
            rows,
            "startup: instructions of a one-turn `dsh exec` (callgrind)",
        );
        g.info("whole run", &[base as f64 / 1e6], "M", 2);
        for (entry, ok) in PLUGINS.iter().zip(&usable) {
            if !ok {
                continue;
            }
            if let Some(n) = instructions(dsh, Some(*entry))? {
                let added = base as f64 - n as f64;
                g.info(&format!("`{}` adds", entry.0), &[added / 1e6], "M", 2);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_removes_every_row_of_an_entry() {
        let text = patch_text("jobs+tool-jobs", "jobs+tool-jobs");
        assert_eq!(
            text,
            "plugins:\n  - id: jobs\n    name: jobs\n    disabled: true\n  - id: tool-jobs\n    name: tool-jobs\n    disabled: true\n"
        );
    }
}
