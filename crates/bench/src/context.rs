//! Project context startup cost: `dsh exec` spawn → first request in a repository with nested
//! `AGENTS.md` / `CLAUDE.md` files six levels deep, 50 skills, 10 custom commands and a hook
//! file, against the same run in an empty directory (interleaved); and the in-process cost of
//! loading all of it (discovery, reading, validation, the baseline and the catalog texts).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use dsh_testkit::Completion;

use crate::report::Group;
use crate::report::Row;
use crate::run::{World, run_dsh};

/// Directories below the project root down to the working directory.
const DEPTH: usize = 5;
/// Skills in `.dsh/skills`.
const SKILLS: usize = 50;
/// Commands in `.claude/commands`.
const COMMANDS: usize = 10;

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).with_context(|| format!("creating {}", p.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Fills `root` (a project) and `home` (DSH_HOME); returns the deepest directory.
pub fn populate(root: &Path, home: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(root.join(".git"))?;
    let rule = "- Keep functions short; prefer early returns.\n".repeat(40);
    write(&home.join("AGENTS.md"), &format!("# User rules\n{rule}"))?;
    let mut dir = root.to_path_buf();
    for level in 0..=DEPTH {
        write(&dir.join("AGENTS.md"), &format!("# Level {level}\n{rule}"))?;
        write(
            &dir.join("CLAUDE.md"),
            &format!("# Claude level {level}\n{rule}"),
        )?;
        if level < DEPTH {
            dir = dir.join(format!("l{level}"));
        }
    }
    for i in 0..SKILLS {
        let s = root.join(format!(".dsh/skills/skill-{i:02}"));
        write(
            &s.join("SKILL.md"),
            &format!(
                "---\nname: skill-{i:02}\ndescription: Does task number {i} the way this team likes it, step by step.\n---\n{rule}"
            ),
        )?;
        write(&s.join("reference.md"), "# Reference\n")?;
    }
    for i in 0..COMMANDS {
        write(
            &root.join(format!(".claude/commands/cmd-{i}.md")),
            "---\ndescription: A command\n---\nDo $ARGUMENTS carefully.\n",
        )?;
    }
    write(
        &root.join(".claude/settings.json"),
        r#"{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"true"}]}]}}"#,
    )?;
    Ok(dir)
}

/// Spawn → first request, ms, of one `dsh exec` in a populated project or an empty one.
fn first_request_ms(dsh: &Path, populated: bool) -> Result<f64> {
    let world = World::new()?;
    let cwd = if populated {
        populate(&world.work, world.home.path())?
    } else {
        world.work.clone()
    };
    world
        .server
        .push(Completion::new().text("Context probe done.").reply());
    let cwd_arg = cwd.display().to_string();
    let out = run_dsh(dsh, &world, &["exec", "--cwd", &cwd_arg, "Hello"], false)
        .context("the context probe run")?;
    let reqs = world
        .server
        .wait_for_finished_blocking(1, Duration::from_secs(10))
        .context("the context probe: the response never ended")?;
    ensure!(
        reqs.len() == 1,
        "the context probe: {} requests",
        reqs.len()
    );
    if populated {
        let body = String::from_utf8_lossy(&reqs[0].body);
        ensure!(
            body.contains("Instructions from: ") && body.contains("skill-49"),
            "the context probe's request carries no instructions or catalog"
        );
    }
    Ok(reqs[0]
        .arrived_at
        .duration_since(out.spawned_at)
        .as_secs_f64()
        * 1e3)
}

/// In-process: everything `dsh context` loads plus the baseline and catalog texts, µs.
fn load_us(root: &Path, home: &Path, cwd: &Path) -> f64 {
    let config = dsh_context::instructions::InstructionsConfig::default();
    let started = Instant::now();
    let paths = dsh_context::ProjectPaths::with_homes(
        cwd,
        &config.project_root_markers,
        home.to_path_buf(),
        None,
        None,
    );
    let report = dsh_context::report::load(paths, &config, &[]);
    let baseline =
        dsh_context::instructions::baseline(&report.instructions.files, config.max_bytes);
    let catalog = dsh_context::skills::catalog(&report.skills);
    let elapsed = started.elapsed();
    std::hint::black_box((baseline, catalog, root));
    elapsed.as_secs_f64() * 1e6
}

/// The rows of the scenario.
pub fn rows(dsh: &Path, quick: bool, iterations: u32, rows: &mut Vec<Row>) -> Result<()> {
    let mut plain = Vec::new();
    let mut loaded = Vec::new();
    // Two short runs per iteration: cheap enough for several even in the quick plan.
    let runs = if quick { 3 } else { iterations.max(5) };
    for _ in 0..runs {
        plain.push(first_request_ms(dsh, false)?);
        loaded.push(first_request_ms(dsh, true)?);
    }
    let added: Vec<f64> = loaded.iter().zip(&plain).map(|(l, p)| l - p).collect();
    let dir = tempfile::tempdir().context("creating the context fixture")?;
    let home = tempfile::tempdir().context("creating the context home")?;
    let root = dir.path().canonicalize()?;
    let cwd = populate(&root, home.path())?;
    let n = if quick { 5 } else { 50 };
    let inproc: Vec<f64> = (0..n).map(|_| load_us(&root, home.path(), &cwd)).collect();
    let mut g = Group::new(
        rows,
        format!(
            "project context ({} instruction files over {DEPTH} levels, {SKILLS} skills, {COMMANDS} commands)",
            2 * (DEPTH + 1) + 1
        ),
    );
    g.info("spawn → first request, empty directory", &plain, "ms", 2);
    g.info("spawn → first request, with the context", &loaded, "ms", 2);
    g.info("context added to the first request", &added, "ms", 2);
    g.info(
        "in-process load (files, skills, commands, texts)",
        &inproc,
        "µs",
        0,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixture_loads_every_file_skill_and_command() {
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let cwd = populate(&root, home.path()).unwrap();
        let config = dsh_context::instructions::InstructionsConfig::default();
        let paths = dsh_context::ProjectPaths::with_homes(
            &cwd,
            &config.project_root_markers,
            home.path().to_path_buf(),
            None,
            None,
        );
        let r = dsh_context::report::load(paths, &config, &[]);
        assert_eq!(r.instructions.files.len(), 2 * (DEPTH + 1) + 1);
        assert_eq!(r.skills.skills.len(), SKILLS);
        assert_eq!(r.commands.commands.len(), COMMANDS);
        assert!(load_us(&root, home.path(), &cwd) > 0.0);
    }
}
