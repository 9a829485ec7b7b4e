//! `subagent` and `subagent_fork`.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_jobs_api::{JobReport, JobSpec, Jobs, Producer};
use dsh_kernel::Ctx;
use dsh_session::wire::JobStatus;
use dsh_subagent_api::{
    Capabilities, StopReason, SubagentError, SubagentMode, SubagentRequest, Subagents, texts,
};
use dsh_tools::{Concurrency, DisplayInput, Tool, ToolContext, ToolDisplay, ToolError, ToolOutput};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::args::{DelegateArgs, Flag, non_empty, parse};

/// Description of `subagent`. Part of the cached prompt prefix: keep it stable.
pub const SPAWN_DESCRIPTION: &str = "Start an independent subagent with a fresh context for a \
self-contained task; its final answer is this call's result.\n\
\n\
It knows nothing of this conversation: put all it needs in `prompt` (goal, paths, constraints, \
what to report). It has your tools and works in this session's working directory (or `cwd`). \
Several calls in one response run at once.";

/// Description of `subagent_fork`. Part of the cached prompt prefix: keep it stable.
pub const FORK_DESCRIPTION: &str = "Start a subagent seeded with this conversation's completed \
turns (not the current one); its final answer is this call's result.\n\
\n\
It knows what was said and done before this turn, so `prompt` only needs the new task. It has \
your tools and works in this session's working directory (or `cwd`). Several calls in one \
response run at once.";

/// Description of `subagent` in `continuable` mode. Part of the cached prompt prefix.
pub const SPAWN_CONTINUABLE_DESCRIPTION: &str = "Start an independent subagent with a fresh \
context to do a self-contained task. It runs in the background and this call returns its id at \
once; you are told when it finishes, with its closing message, and it may report to you before \
that.\n\
\n\
The subagent starts with no knowledge of this conversation: put everything it needs in `prompt` \
(the goal, file paths, constraints, what to report back). It has the same tools as you and works \
in this session's working directory (or `cwd`). Delegate independent tasks together and keep \
working meanwhile; set `run_in_background: false` only when you cannot continue without its \
answer. Later, `send_message` with its id gives it more work as a new turn. `description` is a \
3-5 word label for the task.";

/// Description of `subagent_fork` in `continuable` mode. Part of the cached prompt prefix.
pub const FORK_CONTINUABLE_DESCRIPTION: &str = "Start a subagent seeded with this \
conversation's completed turns (not the current one). It runs in the background and this call \
returns its id at once; you are told when it finishes, with its closing message.\n\
\n\
The subagent already knows what was said and done before this turn, so `prompt` only needs the \
new task. It has the same tools as you and works in this session's working directory (or \
`cwd`). Set `run_in_background: false` only when you cannot continue without its answer. Later, \
`send_message` with its id gives it more work as a new turn. `description` is a 3-5 word label \
for the task.";

/// How `run_in_background` behaves (the original's `backgroundMode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum BackgroundMode {
    /// Foreground by default; background runs are one-shot jobs (`job_output`).
    #[default]
    OneShot,
    /// Background by default: a durable, continuable child (`started subagent <id>`, a
    /// settlement notice later, `send_message` continues it).
    Continuable,
}

/// The arguments schema shared by both tools: the original 0.2.1's `{cwd?, description,
/// prompt}`, plus 0.1.1's `run_in_background?` when background runs are enabled.
fn parameters(background: bool) -> Value {
    parameters_for(background, BackgroundMode::OneShot)
}

fn parameters_for(background: bool, mode: BackgroundMode) -> Value {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "cwd": {"type": "string"},
            "description": {"type": "string", "description": "A 3-5 word label for the task."},
            "prompt": {"type": "string"}
        },
        "required": ["description", "prompt"]
    });
    if background {
        schema["properties"]["run_in_background"] = match mode {
            BackgroundMode::OneShot => json!({
                "type": "boolean",
                "description": "Run as a job: its id now, the result by job_output (default false)."
            }),
            BackgroundMode::Continuable => json!({
                "type": "boolean",
                "description": "Return the subagent's id at once and be told when it finishes (default true); false waits for its answer."
            }),
        };
    }
    schema
}

/// The result text of a background start.
pub fn started_text(job_id: &str) -> String {
    dsh_jobs_api::started_text("subagent", job_id)
}

/// The error text when no jobs service is mounted.
pub use dsh_jobs_api::JOBS_UNAVAILABLE;

/// `subagent` (spawn) or `subagent_fork` (fork).
pub struct DelegateTool {
    name: String,
    description: &'static str,
    mode: SubagentMode,
    subagents: Arc<dyn Subagents>,
    parameters: Value,
    /// Where the `jobs` service is looked up at call time; `None`: no background runs.
    jobs_lookup: Option<Ctx>,
    background_mode: BackgroundMode,
    capabilities: Capabilities,
}

impl std::fmt::Debug for DelegateTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegateTool")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl DelegateTool {
    /// The `subagent` tool (fresh context).
    pub fn spawn(subagents: Arc<dyn Subagents>) -> Self {
        Self {
            name: "subagent".to_owned(),
            description: SPAWN_DESCRIPTION,
            mode: SubagentMode::Spawn,
            subagents,
            parameters: parameters(false),
            jobs_lookup: None,
            background_mode: BackgroundMode::OneShot,
            capabilities: Capabilities::default(),
        }
    }

    /// The `subagent_fork` tool (seeded with the completed turns).
    pub fn fork(subagents: Arc<dyn Subagents>) -> Self {
        Self {
            name: "subagent_fork".to_owned(),
            description: FORK_DESCRIPTION,
            mode: SubagentMode::Fork,
            subagents,
            parameters: parameters(false),
            jobs_lookup: None,
            background_mode: BackgroundMode::OneShot,
            capabilities: Capabilities::default(),
        }
    }

    /// Builder: the tool's name (the original's `toolName`).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Builder: the capabilities every child of this tool gets.
    pub fn with_capabilities(mut self, capabilities: Capabilities) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// Builder: `continuable` children (background by default, `started subagent <id>`).
    /// Call after [`DelegateTool::with_background`] when background runs are enabled.
    pub fn continuable(mut self) -> Self {
        self.background_mode = BackgroundMode::Continuable;
        self.description = match self.mode {
            SubagentMode::Spawn => SPAWN_CONTINUABLE_DESCRIPTION,
            SubagentMode::Fork => FORK_CONTINUABLE_DESCRIPTION,
        };
        self.parameters = parameters_for(self.jobs_lookup.is_some(), self.background_mode);
        self
    }

    /// Builder: accept `run_in_background`, starting background runs on the `jobs` service
    /// found through `ctx` at call time.
    pub fn with_background(mut self, ctx: Ctx) -> Self {
        self.parameters = parameters(true);
        self.jobs_lookup = Some(ctx);
        self
    }

    fn background(
        &self,
        ctx: &ToolContext,
        request: SubagentRequest,
    ) -> Result<ToolOutput, ToolError> {
        let jobs = self
            .jobs_lookup
            .as_ref()
            .and_then(|c| c.get::<dyn Jobs>())
            .ok_or_else(|| ToolError::failed(JOBS_UNAVAILABLE))?;
        let spec = JobSpec::for_tool_call(
            request.parent_id.clone(),
            "subagent",
            request.label.clone(),
            ctx.call_id(),
        );
        let subagents = self.subagents.clone();
        let producer: Producer = Box::new(move |cancel| {
            Box::pin(async move {
                let request = SubagentRequest { cancel, ..request };
                match subagents.run(request).await {
                    Ok(o) if o.stop_reason == StopReason::Completed => JobReport {
                        status: JobStatus::Completed,
                        output: o.structured.map(|v| v.to_string()).unwrap_or(o.output),
                        detail: None,
                    },
                    Ok(o) => JobReport {
                        status: if o.stop_reason == StopReason::Aborted {
                            JobStatus::Killed
                        } else {
                            JobStatus::Failed
                        },
                        output: texts::failure_text(
                            o.stop_reason,
                            o.diagnostic.as_deref(),
                            &o.output,
                        ),
                        detail: Some(format!("stop reason: {}", o.stop_reason.as_str())),
                    },
                    Err(e) => JobReport {
                        status: JobStatus::Failed,
                        output: e.to_string(),
                        detail: None,
                    },
                }
            })
        });
        let id = jobs
            .start(spec, producer)
            .map_err(|e| ToolError::failed(e.to_string()))?;
        Ok(ToolOutput::text(started_text(&id)).with_meta(json!({ "jobId": id })))
    }

    async fn call(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let a: DelegateArgs = parse(&args)?;
        let label = non_empty(
            a.description.filter(|s| !s.trim().is_empty()),
            "description",
        )?;
        let prompt = non_empty(a.prompt.filter(|s| !s.trim().is_empty()), "prompt")?;
        let cwd = match a.cwd.as_deref() {
            Some(c) if !c.is_empty() => {
                let p = PathBuf::from(c);
                let p = if p.is_absolute() {
                    p
                } else {
                    ctx.cwd().join(p)
                };
                if !p.is_dir() {
                    return Err(ToolError::invalid_args(format!(
                        "invalid cwd: {} is not a directory",
                        p.display()
                    )));
                }
                Some(p)
            }
            _ => None,
        };
        let continuable = self.background_mode == BackgroundMode::Continuable;
        let request = SubagentRequest {
            parent_id: ctx.session_id().to_owned(),
            mode: self.mode,
            label,
            prompt,
            cwd,
            cancel: ctx.cancel_token().clone(),
            continuable,
            capabilities: self.capabilities.clone(),
        };
        let background = match a.run_in_background {
            None => continuable && self.jobs_lookup.is_some(),
            Some(Flag::Bool(b)) => b && self.jobs_lookup.is_some(),
            Some(Flag::Other(other)) => {
                return Err(ToolError::invalid_args(format!(
                    "invalid run_in_background: expected a boolean, got {other}"
                )));
            }
        };
        if background && continuable {
            let id = self.subagents.start(request).await.map_err(|e| match e {
                SubagentError::Cancelled => ToolError::aborted(),
                other => ToolError::failed(other.to_string()),
            })?;
            return Ok(ToolOutput::text(texts::started_continuable(&id))
                .with_meta(json!({ "childSessionId": id, "provider": self.mode.provider() })));
        }
        if background {
            return self.background(&ctx, request);
        }
        let outcome = self.subagents.run(request).await.map_err(|e| match e {
            SubagentError::Cancelled => ToolError::aborted(),
            other => ToolError::failed(other.to_string()),
        })?;
        if outcome.stop_reason == StopReason::Aborted && ctx.cancel_token().is_cancelled() {
            return Err(ToolError::aborted());
        }
        let meta = json!({
            "childSessionId": outcome.child_id,
            "provider": self.mode.provider(),
            "stopReason": outcome.stop_reason.as_str(),
            "requests": outcome.requests,
            "model": outcome.model,
            "usage": serde_json::to_value(outcome.usage).unwrap_or(Value::Null),
            "structured": outcome.structured,
        });
        if outcome.stop_reason != StopReason::Completed {
            return Err(ToolError::failed(texts::failure_text(
                outcome.stop_reason,
                outcome.diagnostic.as_deref(),
                &outcome.output,
            )));
        }
        let text = match &outcome.structured {
            Some(value) => value.to_string(),
            None => outcome.output,
        };
        Ok(ToolOutput::text(text).with_meta(meta))
    }
}

impl Tool for DelegateTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        self.description
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

    fn concurrency(&self, _args: &Value) -> Concurrency {
        Concurrency::ParallelSafe
    }

    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        crate::display::delegate_display(call)
    }
}
