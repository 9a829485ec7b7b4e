//! `dsh-tool-workdir`: the `working_directory` tool.
//!
//! Without arguments it reports the session's working directory; with `cd` it changes it
//! (relative to the current one, `~` for the home directory, validated: it must exist and be
//! a directory), records `working-directory/change {cwd}` in the log
//! ([`dsh_session::feature::WorkingDirectoryChange`]; resume restores the latest one) and moves
//! the agent ([`dsh_agent::Agent::set_cwd`]): later `bash` calls, file tools, the instruction
//! loader and the runtime-context snapshot use the new directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_agent::Agents;
use dsh_kernel::{BoxError, Ctx, Dep, EmptyConfig, Plugin};
use dsh_session::NewEvent;
use dsh_session::feature::WorkingDirectoryChange;
use dsh_tools::{
    DisplayInput, Tool, ToolContext, ToolDisplay, ToolError, ToolErrorCode, ToolKind, ToolOutput,
    Tools,
};
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// The directory named by `cd` does not exist or is not a directory.
pub const WORKDIR_INVALID: ToolErrorCode = ToolErrorCode::tool_defined("WORKDIR_INVALID");

const DESCRIPTION: &str = "Show the working directory, or change it with `cd` (relative to the \
current one).";

/// The `working_directory` tool.
pub struct WorkingDirectoryTool {
    ctx: Ctx,
    parameters: Value,
}

impl std::fmt::Debug for WorkingDirectoryTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkingDirectoryTool")
            .finish_non_exhaustive()
    }
}

impl WorkingDirectoryTool {
    /// The tool; it finds the calling agent through the `agents` service of `ctx`.
    pub fn new(ctx: Ctx) -> Self {
        Self {
            ctx,
            parameters: json!({
                "type": "object",
                "properties": {
                    "cd": {"type": "string"}
                }
            }),
        }
    }
}

/// Why [`resolve`] refused a target.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The target is empty or blank.
    #[error("`cd` must be a non-empty path")]
    Empty,
    /// The path does not resolve (missing, unreadable, …).
    #[error("cannot change to {}: {source}", path.display())]
    Unreachable {
        /// The path as joined to the base.
        path: PathBuf,
        /// Why it does not resolve.
        source: std::io::Error,
    },
    /// The path is not a directory.
    #[error("cannot change to {}: not a directory", .0.display())]
    NotADirectory(PathBuf),
}

/// `target` resolved against `base` (`~` and `~/…` against `home`), canonical, and a
/// directory; otherwise the problem.
pub fn resolve(base: &Path, target: &str, home: Option<&Path>) -> Result<PathBuf, ResolveError> {
    let t = target.trim();
    if t.is_empty() {
        return Err(ResolveError::Empty);
    }
    let joined = match (t.strip_prefix('~'), home) {
        (Some(""), Some(h)) => h.to_path_buf(),
        (Some(rest), Some(h)) if rest.starts_with('/') => h.join(&rest[1..]),
        _ => base.join(t),
    };
    let canonical = match joined.canonicalize() {
        Ok(c) => c,
        Err(source) => {
            return Err(ResolveError::Unreachable {
                path: joined,
                source,
            });
        }
    };
    if !canonical.is_dir() {
        return Err(ResolveError::NotADirectory(canonical));
    }
    Ok(canonical)
}

/// The arguments of `working_directory` (the schema checked their shape).
#[derive(Default, serde::Deserialize)]
struct WorkdirArgs {
    #[serde(default)]
    cd: Option<String>,
}

/// The display of a `working_directory` call: the directory asked for, and once it ended the
/// working directory (the result's meta).
pub fn display(call: &DisplayInput<'_>) -> ToolDisplay {
    let mut d = ToolDisplay::new(ToolKind::Other, "working_directory");
    d.subject = call.parse::<WorkdirArgs>().and_then(|a| a.cd);
    if call.succeeded().is_some()
        && let Some(cwd) = call.meta_field("cwd").and_then(Value::as_str)
    {
        d = d.with_field("cwd", cwd);
    }
    d
}

impl Tool for WorkingDirectoryTool {
    fn name(&self) -> &str {
        "working_directory"
    }

    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        display(call)
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execute<'a>(
        &'a self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let args: WorkdirArgs = serde_json::from_value(args).unwrap_or_default();
            let Some(target) = args.cd.as_deref() else {
                return Ok(
                    ToolOutput::text(format!("Working directory: {}", ctx.cwd().display()))
                        .with_meta(json!({"cwd": ctx.cwd().display().to_string()})),
                );
            };
            let home = std::env::var_os("HOME").map(PathBuf::from);
            let dir = resolve(ctx.cwd(), target, home.as_deref())
                .map_err(|e| ToolError::new(WORKDIR_INVALID, e.to_string()))?;
            let agent = self
                .ctx
                .get::<dyn Agents>()
                .and_then(|a| a.get(ctx.session_id()))
                .ok_or_else(|| {
                    ToolError::failed("working_directory requires an owning agent session")
                })?;
            let cwd = dir.display().to_string();
            let event = NewEvent::plugin(&WorkingDirectoryChange { cwd: cwd.clone() })
                .map_err(|e| ToolError::failed(format!("cannot encode the change: {e}")))?;
            agent
                .session()
                .append(event)
                .map_err(|e| ToolError::failed(format!("cannot record the change: {e}")))?;
            agent
                .set_cwd(dir)
                .map_err(|e| ToolError::failed(format!("cannot change directory: {e}")))?;
            Ok(
                ToolOutput::text(format!("Working directory changed to {cwd}"))
                    .with_meta(json!({"cwd": cwd})),
            )
        })
    }
}

/// The `tool-working-directory` plugin: registers `working_directory`.
#[derive(Debug)]
pub struct WorkingDirectoryToolPlugin;

impl Plugin for WorkingDirectoryToolPlugin {
    const NAME: &'static str = "tool-working-directory";
    type Config = EmptyConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Tools>()]
    }

    async fn apply(ctx: Ctx, _config: EmptyConfig) -> Result<(), BoxError> {
        let tools = ctx.dep::<dyn Tools>()?;
        tools.register(&ctx, Arc::new(WorkingDirectoryTool::new(ctx.clone())))?;
        Ok(())
    }
}
