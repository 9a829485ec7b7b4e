//! `dsh context`: what the `context` and `hooks` plugins would load for a directory —
//! instruction files, skills, hooks and custom commands, with their sources and any errors.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::anyhow;
use clap::Args;
use dsh_context::{ContextConfig, ProjectPaths, report};
use dsh_hooks::HooksConfig;
use serde::de::DeserializeOwned;

use crate::compose::{compose, registry};
use crate::config_cmd::write_stdout;
use crate::{ComposeArgs, Failure};

/// `dsh context` options.
#[derive(Debug, Args)]
pub(crate) struct ContextArgs {
    /// The working directory to inspect (default: the current directory).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    #[command(flatten)]
    compose: ComposeArgs,
}

/// The composed config of the first row mounting plugin `name`; `None` when it is not mounted.
fn row_config<T: DeserializeOwned>(args: &ComposeArgs, name: &str) -> Result<Option<T>, Failure> {
    let registry = registry();
    let composition = compose(args, None, &registry)?;
    let Some(r) = composition.rows.iter().find(|r| r.row.name == name) else {
        return Ok(None);
    };
    let value = match &r.row.config {
        serde_json::Value::Null => serde_json::json!({}),
        v => v.clone(),
    };
    serde_json::from_value(value)
        .map(Some)
        .map_err(|e| Failure::usage(anyhow!("plugin `{name}` config: {e}")))
}

/// Runs `dsh context`.
pub(crate) fn run(args: &ContextArgs) -> Result<u8, Failure> {
    let cwd = match &args.cwd {
        Some(d) => d.clone(),
        None => std::env::current_dir()
            .map_err(|e| Failure::usage(anyhow!("cannot read the current directory: {e}")))?,
    };
    if !cwd.is_dir() {
        return Err(Failure::usage(anyhow!(
            "{} is not a directory",
            cwd.display()
        )));
    }
    let context: Option<ContextConfig> = row_config(&args.compose, "context")?;
    let hooks: Option<HooksConfig> = row_config(&args.compose, "hooks")?;
    let cfg = context.clone().unwrap_or_default();
    let paths = ProjectPaths::discover(&cwd, &cfg.instructions.project_root_markers);
    let r = report::load(paths, &cfg.instructions, &cfg.custom_skill_dirs);
    let mut out = String::new();
    let _ = writeln!(out, "Working directory: {}", r.paths.cwd.display());
    let _ = writeln!(out, "Project root: {}", r.paths.root.display());
    if context.is_none() {
        out.push_str("(the `context` plugin is not mounted: nothing below is loaded)\n");
    }

    out.push_str("\nInstruction files, in order:\n");
    if r.instructions.files.is_empty() {
        out.push_str("  (none)\n");
    }
    for (i, f) in r.instructions.files.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {}. {} ({}, {} bytes)",
            i + 1,
            f.path.display(),
            f.scope.as_str(),
            f.content.len()
        );
    }
    for s in &r.instructions.skipped {
        let _ = writeln!(out, "  skipped {}: {}", s.path.display(), s.reason);
    }
    let total: usize = r.instructions.files.iter().map(|f| f.content.len()).sum();
    if total > cfg.instructions.max_bytes {
        let _ = writeln!(
            out,
            "  budget: {total} bytes, over maxBytes {}: the broadest files are dropped",
            cfg.instructions.max_bytes
        );
    }

    out.push_str("\nSkills:\n");
    if r.skills.skills.is_empty() {
        out.push_str("  (none)\n");
    }
    for s in &r.skills.skills {
        let who = match (s.model_invocable, s.user_invocable) {
            (true, true) => "model, /name",
            (true, false) => "model",
            (false, true) => "/name only",
            (false, false) => "nobody",
        };
        let _ = writeln!(
            out,
            "  {} [{who}] {}\n    {}",
            s.name,
            s.file.display(),
            s.description
        );
    }
    for s in &r.skills.shadowed {
        let _ = writeln!(
            out,
            "  shadowed {} {} (a better-ranked root has it)",
            s.name,
            s.file.display()
        );
    }
    for p in &r.skills.problems {
        let _ = writeln!(out, "  error {}: {}", p.file.display(), p.reason);
    }
    let roots: Vec<String> = r
        .skill_roots
        .iter()
        .map(|s| format!("{} {}", s.rank, s.dir.display()))
        .collect();
    let _ = writeln!(out, "  roots: {}", roots.join(", "));

    out.push_str("\nHooks:\n");
    match &hooks {
        None => out.push_str("  (the `hooks` plugin is not mounted)\n"),
        Some(h) => {
            let set = dsh_hooks::config::load(&r.paths, &h.files);
            if set.files.is_empty() && set.problems.is_empty() {
                out.push_str("  (none)\n");
            }
            for f in &set.files {
                let _ = writeln!(out, "  {} ({})", f.path.display(), f.dialect.as_str());
                for g in &f.groups {
                    let matcher = match &g.matcher {
                        dsh_hooks::config::Matcher::All => "*".to_owned(),
                        dsh_hooks::config::Matcher::Names(n) => n.join("|"),
                        dsh_hooks::config::Matcher::Regex(r) => format!("/{}/", r.as_str()),
                    };
                    for h in &g.handlers {
                        let t = h
                            .timeout
                            .map(|t| format!(" (timeout {}s)", t.as_secs_f64()))
                            .unwrap_or_default();
                        let _ =
                            writeln!(out, "    {} [{matcher}] {}{t}", g.event.as_str(), h.command);
                    }
                }
                for s in &f.skipped {
                    let _ = writeln!(out, "    skipped {s}");
                }
            }
            for (p, why) in &set.problems {
                let _ = writeln!(out, "  error {}: {why}", p.display());
            }
        }
    }

    out.push_str("\nCommands:\n");
    if r.commands.commands.is_empty() {
        out.push_str("  (none)\n");
    }
    for c in &r.commands.commands {
        let hint = c
            .argument_hint
            .as_deref()
            .map(|h| format!(" {h}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  /{}{hint} — {} ({})",
            c.name,
            c.description,
            c.file.display()
        );
    }
    for p in &r.commands.problems {
        let _ = writeln!(out, "  error {}: {}", p.file.display(), p.reason);
    }
    write_stdout(&out)
}
