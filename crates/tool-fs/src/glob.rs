//! The `glob` tool: files matching a glob, oldest modification first, capped at 100.
//!
//! Like upstream (`rg --files --hidden --no-ignore --sort=modified`): hidden and git-ignored
//! files are included, VCS directories are skipped, symlinks are not followed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use dsh_tools::{ToolContext, ToolError, ToolOutput};
use globset::{GlobBuilder, GlobMatcher};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::args::{nonblank, opt_nonblank, parse};
use crate::paths::{codes, display_path, resolve_path};

/// Paths listed inline.
pub const MAX_PATHS: usize = 100;
/// The tool's time budget.
pub const TIMEOUT: Duration = Duration::from_secs(30);
/// Version-control directories never descended into.
pub const VCS_DIRS: [&str; 6] = [".git", ".svn", ".hg", ".bzr", ".jj", ".sl"];

/// The JSON Schema of `glob`'s arguments.
pub fn schema() -> Value {
    json!({"type":"object","properties":{
        "pattern":{"type":"string","description":"E.g. \"**/*.rs\", \"src/*.ts\"; without \"/\" it matches file names at any depth."},
        "path":{"type":"string","description":"Directory (default: the working directory)."}},
      "required":["pattern"]})
}

/// The description sent to the model.
pub const DESCRIPTION: &str = "Find files (not directories) by glob, hidden and git-ignored \
ones included, VCS directories excluded, oldest modification first. At most 100; more are saved \
to a file you can read or grep. Paths inside the working directory are relative to it.";

/// `glob`'s arguments, as its schema names them.
#[derive(serde::Deserialize)]
struct GlobArgs {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
}

/// Run `glob`.
pub async fn run(ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
    let a: GlobArgs = parse(args)?;
    let pattern = nonblank(&a.pattern, "pattern")?.to_owned();
    let root = match opt_nonblank(a.path.as_deref(), "path")? {
        Some(p) => resolve_path(ctx.cwd(), p),
        None => ctx.cwd().to_path_buf(),
    };
    let cancel = ctx.cancel_token().clone();
    let task_ctx = ctx.clone();
    tokio::task::spawn_blocking(move || {
        let files = find(&root, &pattern, &cancel)?;
        Ok(format(&task_ctx, files))
    })
    .await
    .map_err(|e| ToolError::failed(format!("glob task failed: {e}")))?
}

fn matcher(root: &Path, pattern: &str) -> Result<(GlobMatcher, bool), ToolError> {
    let mut pat = pattern.trim().to_owned();
    if let Ok(rel) = Path::new(&pat).strip_prefix(root) {
        pat = rel.to_string_lossy().into_owned();
    }
    let pat = pat
        .trim_start_matches("./")
        .trim_start_matches('/')
        .to_owned();
    let basename_only = !pat.contains('/');
    let glob = GlobBuilder::new(&pat)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| {
            ToolError::new(
                codes::SEARCH_INVALID_PATTERN,
                format!("glob pattern rejected: {e}"),
            )
        })?;
    Ok((glob.compile_matcher(), basename_only))
}

/// All files under `root` matching `pattern`, sorted by modification time then path.
pub fn find(
    root: &Path,
    pattern: &str,
    cancel: &CancellationToken,
) -> Result<Vec<PathBuf>, ToolError> {
    if let Err(e) = std::fs::metadata(root) {
        return Err(crate::paths::io_error("glob", root, &e));
    }
    let (glob, basename_only) = matcher(root, pattern)?;
    let walker = ignore::WalkBuilder::new(root)
        .standard_filters(false)
        .hidden(false)
        .follow_links(false)
        .filter_entry(|e| {
            !(e.file_type().is_some_and(|t| t.is_dir())
                && e.file_name()
                    .to_str()
                    .is_some_and(|n| VCS_DIRS.contains(&n)))
        })
        .build();
    let mut found: Vec<(SystemTime, PathBuf)> = Vec::new();
    for entry in walker {
        if cancel.is_cancelled() {
            return Err(ToolError::aborted());
        }
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        let hit = if basename_only {
            path.file_name().is_some_and(|n| glob.is_match(n))
        } else {
            let rel = path.strip_prefix(root).unwrap_or(path);
            glob.is_match(rel)
        };
        if hit {
            let mtime = entry
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            found.push((mtime, path.to_path_buf()));
        }
    }
    found.sort();
    Ok(found.into_iter().map(|(_, p)| p).collect())
}

fn format(ctx: &ToolContext, files: Vec<PathBuf>) -> ToolOutput {
    let total = files.len();
    let shown: Vec<String> = files.iter().map(|p| display_path(ctx.cwd(), p)).collect();
    let meta = json!({"count": total, "truncated": total > MAX_PATHS});
    if total == 0 {
        return ToolOutput::text("No files found").with_meta(meta);
    }
    if total <= MAX_PATHS {
        return ToolOutput::text(shown.join("\n")).with_meta(meta);
    }
    let head = shown[..MAX_PATHS].join("\n");
    let footer = match save(ctx, &shown) {
        Ok(path) => format!(
            "(Showing {MAX_PATHS} of {total} paths. Full sorted result stored at: {}. Use read with offset/limit, or grep this path to search within it.)",
            path.display()
        ),
        Err(e) => {
            tracing::warn!(error = %e, "glob: could not save the full result");
            format!(
                "(Showing {MAX_PATHS} of {total} paths. The complete result could not be saved; narrow pattern or path to see more.)"
            )
        }
    };
    ToolOutput::text(format!("{head}\n\n{footer}")).with_meta(meta)
}

fn save(ctx: &ToolContext, lines: &[String]) -> std::io::Result<PathBuf> {
    ctx.check_scratch_room(lines.iter().map(|l| l.len() as u64 + 1).sum())?;
    let (file, path) = ctx.create_spill_file("glob", "txt")?;
    let mut w = std::io::BufWriter::new(file);
    for line in lines {
        w.write_all(line.as_bytes())?;
        w.write_all(b"\n")?;
    }
    w.flush()?;
    Ok(path)
}
