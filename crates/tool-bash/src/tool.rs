//! `BashTool`: the `bash` tool over the `shell` service, and the plugin that registers it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dsh_kernel::{BoxError, Ctx, Dep, EmptyConfig, Plugin};
use dsh_sandbox::{Confined, Sandbox, SandboxPolicy};
use dsh_shell::{ShellError, ShellExecutor, ShellOutcome, ShellRequest, limits};
use dsh_tools::{
    DisplayInput, Tool, ToolContext, ToolDisplay, ToolError, ToolErrorCode, ToolOutput, Tools,
};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::args::{BashArgs, parameters};
use crate::format::format_result;

/// The tool's name as the model calls it.
pub const NAME: &str = "bash";

/// The description sent to the model. Part of the cached prompt prefix: keep it stable.
pub const DESCRIPTION: &str = "Run a command with `bash -c` and return its output.\n\
\n\
Each call is a fresh process (no rc files, no state kept) in the session's working directory: \
use `workdir`, not `cd`; chain steps with `&&`. stdin is /dev/null; background processes are \
stopped when the command ends. Prefer read, glob and grep for files.\n\
\n\
Result: stdout, then `[stderr]` and stderr, or `(no output)`; a failure adds `[exit code: N]`, \
`[timed out after <ms>ms]` or `[killed by signal: <SIG>]`. Each stream keeps its last 64000 \
bytes; the whole is saved to a file a note names. Env: DSH_SHELL=1, DSH_SESSION_ID, no \
secrets. A call the sandbox, an approval or a hook refuses is not run: the result is an \
`Error:` line saying why.";

/// Code of a result whose shell process could not be started.
pub const SPAWN_FAILED: ToolErrorCode = ToolErrorCode::tool_defined("BASH_SPAWN_FAILED");

/// The `bash` tool. Exclusive (never runs in parallel with other calls).
pub struct BashTool {
    shell: Arc<dyn ShellExecutor>,
    parameters: Value,
    /// Where the `sandbox` service is looked up at call time (softly: without one, commands
    /// run unconfined). `None`: never confined.
    sandbox_lookup: Option<Ctx>,
}

impl std::fmt::Debug for BashTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BashTool")
            .field("shell", &self.shell.name())
            .finish()
    }
}

impl BashTool {
    /// A `bash` tool running its commands on `shell`.
    pub fn new(shell: Arc<dyn ShellExecutor>) -> Self {
        Self {
            shell,
            parameters: parameters(),
            sandbox_lookup: None,
        }
    }

    /// Builder: confine every command with the `sandbox` service found through `ctx` at call
    /// time (the plugin sets this).
    pub fn with_sandbox_lookup(mut self, ctx: Ctx) -> Self {
        self.sandbox_lookup = Some(ctx);
        self
    }

    /// The policy of this call and the launcher prefix that enforces it; a restricted mode
    /// without a working backend refuses the call (`SANDBOX_UNAVAILABLE`) before anything runs.
    fn confinement(
        &self,
        ctx: &ToolContext,
    ) -> Result<Option<(SandboxPolicy, Confined)>, ToolError> {
        let Some(sandbox) = self
            .sandbox_lookup
            .as_ref()
            .and_then(|c| c.get::<dyn Sandbox>())
        else {
            return Ok(None);
        };
        let policy = sandbox.policy(ctx.session_id(), ctx.cwd(), Some(ctx.call_id()));
        let confined = sandbox.confine(&policy, Vec::new())?;
        Ok(Some((policy, confined)))
    }

    async fn call(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args = BashArgs::parse(&args).map_err(|e| ToolError::invalid_args(e.to_string()))?;
        let workdir = args.resolve_workdir(ctx.cwd());
        let confinement = self.confinement(&ctx)?;
        let mut request = ShellRequest::new(args.command.clone(), workdir.clone())
            .with_timeout(args.timeout)
            .with_session_id(ctx.session_id())
            .with_cancel(ctx.cancel_token().child_token());
        if let Some((_, confined)) = &confinement {
            request = request
                .with_wrapper(confined.argv.clone())
                .with_supervisor(confined.supervisor.clone());
        }
        if let Some(dir) = ctx.scratch_dir() {
            request = request.with_spill_dir(dir);
            if let Some(cap) = ctx.scratch_cap() {
                request = request.with_spill_total_cap(cap);
            }
        }
        let outcome = self
            .shell
            .run(request)
            .await
            .map_err(|error| shell_error(error, args.workdir.as_deref()))?;
        if outcome.cancelled {
            return Err(ToolError::aborted());
        }
        tracing::debug!(
            termination = %outcome.termination,
            timed_out = outcome.timed_out,
            elapsed_ms = outcome.elapsed.as_millis() as u64,
            "bash call finished"
        );
        let mut text = format_result(&outcome);
        let mut meta = meta(&outcome, &workdir, &args);
        if let Some((policy, _)) = &confinement
            && let Some(marker) = denial_marker(policy, &outcome)
        {
            text.push('\n');
            text.push_str(&marker);
            meta["sandboxDenied"] = Value::Bool(true);
        }
        if let Some((policy, _)) = &confinement {
            meta["sandboxMode"] = Value::String(policy.mode.as_str().into());
        }
        Ok(ToolOutput::text(text).with_meta(meta))
    }
}

/// The `[sandbox: file access denied under <mode> mode]` marker (upstream §3.1.6) when a
/// confined command failed with a denial signature (bwrap's read-only bind: `Read-only file
/// system`; Landlock: `Permission denied`).
fn denial_marker(policy: &SandboxPolicy, outcome: &ShellOutcome) -> Option<String> {
    if !policy.mode.is_restricted() || outcome.termination.success() {
        return None;
    }
    let stderr = outcome.stderr.text();
    let denied = stderr.contains("Read-only file system") || stderr.contains("Permission denied");
    denied.then(|| format!("[sandbox: file access denied under {} mode]", policy.mode))
}

/// Maps an infrastructure failure to an error result the model can act on.
fn shell_error(error: ShellError, workdir: Option<&str>) -> ToolError {
    match error {
        ShellError::WorkingDirectory { path, reason } => match workdir {
            Some(_) => ToolError::invalid_args(format!(
                "invalid workdir: {} is unusable: {reason}",
                path.display()
            )),
            None => ToolError::failed(format!(
                "the session's working directory {} is unusable: {reason}",
                path.display()
            )),
        },
        ShellError::InvalidRequest(message) => {
            ToolError::invalid_args(format!("invalid command: {message}"))
        }
        error @ ShellError::Spawn { .. } => ToolError::new(SPAWN_FAILED, error.to_string()),
        error => ToolError::failed(error.to_string()),
    }
}

/// Structured facts for `tool/result.meta` (UI, logs; not model-visible).
fn meta(outcome: &ShellOutcome, workdir: &Path, args: &BashArgs) -> Value {
    let spill = |s: &dsh_shell::CapturedStream| {
        s.spill_path
            .as_ref()
            .map(|p| Value::String(p.display().to_string()))
            .unwrap_or(Value::Null)
    };
    json!({
        "description": args.description,
        "workdir": workdir.display().to_string(),
        "exitCode": outcome.termination.code(),
        "signal": outcome.termination.signal_name(),
        "timedOut": outcome.timed_out,
        "timeoutMs": outcome.timeout.as_millis() as u64,
        "truncated": outcome.truncated(),
        "stdoutBytes": outcome.stdout.total_bytes,
        "stderrBytes": outcome.stderr.total_bytes,
        "stdoutSpill": spill(&outcome.stdout),
        "stderrSpill": spill(&outcome.stderr),
        // Rounded to the nearest millisecond: truncating under-reported every run by half a
        // millisecond on average (the original's `Date.now()` difference is unbiased), which
        // dsh-bench's per-step overhead (gap minus the tool's run time) counted as harness time.
        "durationMs": rounded_ms(outcome.elapsed),
    })
}

/// `d` in whole milliseconds, rounded to the nearest.
fn rounded_ms(d: std::time::Duration) -> u64 {
    u64::try_from((d.as_micros() + 500) / 1000).unwrap_or(u64::MAX)
}

impl Tool for BashTool {
    fn name(&self) -> &str {
        NAME
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
        Box::pin(self.call(ctx, args))
    }

    /// A safety net only: the command's own deadline (`timeoutMs`, at most 600 s) plus the
    /// kill grace always ends the run first, and a timeout there is a marker in a normal
    /// result, not a `TOOL_TIMEOUT` error. Declared so a pipeline-wide default budget never
    /// cuts a long `timeoutMs` short.
    fn timeout(&self) -> Option<Duration> {
        Some(limits::MAX_TIMEOUT + limits::KILL_GRACE + Duration::from_secs(30))
    }

    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        crate::display::display(call)
    }
}

/// The `tool-bash` plugin: registers [`BashTool`] with the `tools` service, running commands
/// on whatever `shell` service is mounted, confined by the `sandbox` service when one is.
#[derive(Debug)]
pub struct BashToolPlugin;

impl Plugin for BashToolPlugin {
    const NAME: &'static str = "tool-bash";
    type Config = EmptyConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Tools>(), Dep::on::<dyn ShellExecutor>()]
    }

    async fn apply(ctx: Ctx, _config: EmptyConfig) -> Result<(), BoxError> {
        let tools = ctx.dep::<dyn Tools>()?;
        let shell = ctx.dep::<dyn ShellExecutor>()?;
        let tool = BashTool::new(shell).with_sandbox_lookup(ctx.clone());
        tools.register(&ctx, Arc::new(tool))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn durations_round_to_the_nearest_millisecond() {
        assert_eq!(super::rounded_ms(Duration::from_micros(2_499)), 2);
        assert_eq!(super::rounded_ms(Duration::from_micros(2_500)), 3);
        assert_eq!(super::rounded_ms(Duration::from_micros(400)), 0);
    }
}
