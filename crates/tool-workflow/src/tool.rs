//! The `workflow` tool.

use std::sync::Arc;

use dsh_agent::Agents;
use dsh_jobs_api::{JobReport, JobSpec, Jobs, Producer};
use dsh_kernel::{Ctx, ScopeKey};
use dsh_session::wire::JobStatus;
use dsh_subagent_api::Subagents;
use dsh_tools::{DisplayInput, Tool, ToolContext, ToolDisplay, ToolError, ToolOutput, Tools};
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::WorkflowConfig;
use crate::engine::ScriptInput;
use crate::error::WorkflowError;
use crate::run::{RunReport, RunServices, RunSpec, StartRegistry, run};

/// The tool's name.
pub const NAME: &str = "workflow";

/// Description of `workflow`. Part of the cached prompt prefix: keep it stable.
pub const DESCRIPTION: &str = "Run a JavaScript script that orchestrates sub-agents; its return \
value (JSON) is the result. The script is an async function body with globals `args`, `meta`, \
agent({prompt, label?, persona?, schema?, phase?}) and fork(...) (seeded with this \
conversation): each starts a sub-agent at once; `await` it (or Promise.all) for {ok, text, \
value, error}. tools.read/grep/glob(args) resolve to text. No files, processes or network.";

/// The text of a background start.
pub fn started_text(job_id: &str) -> String {
    dsh_jobs_api::started_text(NAME, job_id)
}

/// The error text when no jobs service is mounted.
pub use dsh_jobs_api::JOBS_UNAVAILABLE;

/// The phases of a script, as `meta.phases` names them.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Phase {
    /// The phase's title.
    pub title: String,
    /// What it does.
    #[serde(default)]
    pub detail: Option<String>,
}

/// `meta`: the script's name and description (open: other keys are kept for the script).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// A short name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The phases.
    #[serde(default)]
    pub phases: Vec<Phase>,
}

/// The arguments of a call.
#[derive(Clone, Debug, Deserialize)]
pub struct WorkflowArgs {
    /// The script.
    pub script: String,
    /// Its meta (kept whole for the script's `meta`).
    pub meta: Value,
    /// The script's `args`.
    #[serde(default)]
    pub args: Option<Value>,
    /// Run as a job.
    #[serde(default)]
    pub run_in_background: Option<bool>,
}

fn parameters(background: bool) -> Value {
    let s = json!({"type": "string"});
    let mut schema = json!({
        "type": "object",
        "properties": {
            "script": s,
            "meta": {
                "type": "object",
                "properties": {
                    "name": s,
                    "description": s,
                    "whenToUse": s,
                    "phases": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            // `provider` and `model` (the original's) are accepted and
                            // ignored (every child runs on the caller's route): not declared.
                            "properties": {"title": s, "detail": s},
                            "required": ["title"]
                        }
                    }
                },
                "required": ["name", "description"]
            },
            "args": {"type": "object"}
        },
        "required": ["script", "meta"]
    });
    if background {
        schema["properties"]["run_in_background"] = json!({"type": "boolean"});
    }
    schema
}

/// The `workflow` tool.
pub struct WorkflowTool {
    ctx: Ctx,
    subagents: Arc<dyn Subagents>,
    starts: Arc<StartRegistry>,
    config: Arc<WorkflowConfig>,
    parameters: Value,
}

impl std::fmt::Debug for WorkflowTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkflowTool")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl WorkflowTool {
    /// The tool over `subagents`; the `tools`, `agents` and `jobs` services are found through
    /// `ctx` at call time. `starts` hears the children's `subagent/start` notifications.
    pub fn new(
        ctx: Ctx,
        subagents: Arc<dyn Subagents>,
        starts: Arc<StartRegistry>,
        config: WorkflowConfig,
    ) -> Self {
        Self {
            parameters: parameters(config.enable_run_in_background),
            ctx,
            subagents,
            starts,
            config: Arc::new(config),
        }
    }

    fn services(&self) -> RunServices {
        RunServices {
            subagents: self.subagents.clone(),
            tools: self.ctx.get::<dyn Tools>(),
            agents: self.ctx.get::<dyn Agents>(),
            starts: self.starts.clone(),
            config: self.config.clone(),
        }
    }

    fn spec(ctx: &ToolContext, a: WorkflowArgs, meta: &Meta, tools: Vec<String>) -> RunSpec {
        RunSpec {
            session_id: ctx.session_id().to_owned(),
            call_id: ctx.call_id().to_owned(),
            cwd: ctx.cwd().to_path_buf(),
            scope: ctx.scope().map(ScopeKey::new),
            scratch_dir: ctx.scratch_dir().map(std::path::Path::to_path_buf),
            name: meta.name.trim().to_owned(),
            input: ScriptInput {
                script: a.script,
                args: a.args.unwrap_or_else(|| json!({})),
                meta: a.meta,
                tools,
            },
        }
    }

    async fn call(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let a: WorkflowArgs = serde_json::from_value(args)
            .map_err(|e| ToolError::invalid_args(format!("invalid arguments: {e}")))?;
        let meta: Meta = serde_json::from_value(a.meta.clone())
            .map_err(|e| ToolError::invalid_args(format!("invalid meta: {e}")))?;
        if a.script.trim().is_empty() {
            return Err(ToolError::invalid_args(
                "invalid script: it must be a non-empty string",
            ));
        }
        if meta.name.trim().is_empty() {
            return Err(ToolError::invalid_args(
                "invalid meta: `name` must be a non-empty string",
            ));
        }
        if a.args.as_ref().is_some_and(|v| !v.is_object()) {
            return Err(ToolError::invalid_args("invalid args: expected an object"));
        }
        let background = a.run_in_background.unwrap_or(false);
        if background && !self.config.enable_run_in_background {
            return Err(ToolError::invalid_args(
                "invalid run_in_background: background workflows are disabled",
            ));
        }
        let tools = self.config.tools.clone();
        let spec = Self::spec(&ctx, a, &meta, tools);
        if background {
            return self.background(&ctx, spec);
        }
        let report = run(self.services(), spec, ctx.cancel_token().clone()).await;
        if matches!(report.result, Err(WorkflowError::Cancelled)) {
            return Err(ToolError::aborted());
        }
        let meta = report_meta(&report, &meta.name);
        match report.result {
            Ok(value) => Ok(ToolOutput::json(value).with_meta(meta)),
            Err(e) => Err(ToolError::failed(e.to_string())),
        }
    }

    fn background(&self, ctx: &ToolContext, spec: RunSpec) -> Result<ToolOutput, ToolError> {
        let jobs = self
            .ctx
            .get::<dyn Jobs>()
            .ok_or_else(|| ToolError::failed(JOBS_UNAVAILABLE))?;
        let job = JobSpec::for_tool_call(
            spec.session_id.clone(),
            NAME,
            spec.name.clone(),
            ctx.call_id(),
        );
        let services = self.services();
        let producer: Producer = Box::new(move |cancel: CancellationToken| {
            Box::pin(async move {
                let report = run(services, spec, cancel).await;
                match report.result {
                    Ok(value) => JobReport {
                        status: JobStatus::Completed,
                        output: match value {
                            Value::String(s) => s,
                            other => other.to_string(),
                        },
                        detail: Some(format!("{} sub-agents", report.agents.len())),
                    },
                    Err(WorkflowError::Cancelled) => JobReport {
                        status: JobStatus::Killed,
                        output: WorkflowError::Cancelled.to_string(),
                        detail: None,
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
            .start(job, producer)
            .map_err(|e| ToolError::failed(e.to_string()))?;
        Ok(ToolOutput::text(started_text(&id)).with_meta(json!({ "jobId": id })))
    }
}

/// `tool/result.meta` of a run: what the display shows of it.
fn report_meta(report: &RunReport, name: &str) -> Value {
    json!({
        "runId": report.run_id,
        "name": name,
        "stopReason": match &report.result {
            Ok(_) => "completed",
            Err(e) => e.stop_reason().as_str(),
        },
        "agents": report.agents,
        "tokens": report.tokens,
    })
}

impl Tool for WorkflowTool {
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

    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        crate::display::display(call)
    }
}
