//! `job_output`, `job_list`, `job_kill`.

use std::sync::Arc;
use std::time::Duration;

use dsh_tools::{
    Concurrency, DisplayInput, Tool, ToolContext, ToolDisplay, ToolError, ToolKind, ToolOutput,
};
use futures::future::BoxFuture;
use serde_json::{Number, Value, json};

use crate::Jobs;

/// The display of a job tool's call (`call.name` is the title): the job it is about, and
/// the head of the result.
pub fn display(call: &DisplayInput<'_>) -> ToolDisplay {
    let mut d = ToolDisplay::new(ToolKind::Other, call.name);
    d.subject = call.parse::<JobArgs>().and_then(|s| s.job_id);
    if let Some(r) = call.succeeded() {
        d = d.with_output(dsh_tools::display::output_head(r.text, 3));
    }
    d
}

/// The job tools' arguments (each tool's schema names the ones it takes and checked their
/// shape).
#[derive(serde::Deserialize)]
struct JobArgs {
    #[serde(default)]
    job_id: Option<String>,
    #[serde(default)]
    wait: Option<bool>,
    #[serde(default)]
    timeout_ms: Option<Number>,
    #[serde(default)]
    reason: Option<String>,
}

impl JobArgs {
    /// The arguments; a caller that skipped the schema check gets `invalid arguments: …`.
    fn parse(args: Value) -> Result<Self, ToolError> {
        serde_json::from_value(args)
            .map_err(|e| ToolError::invalid_args(format!("invalid arguments: {e}")))
    }

    /// The required, non-empty `job_id`.
    fn job_id(&mut self) -> Result<String, ToolError> {
        match self.job_id.take() {
            Some(s) if !s.is_empty() => Ok(s),
            _ => Err(ToolError::invalid_args(
                "invalid job_id: expected a non-empty string",
            )),
        }
    }
}

/// `job_output(job_id, wait?, timeout_ms?)`.
pub struct JobOutputTool {
    jobs: Arc<dyn Jobs>,
    parameters: Value,
    default_wait: Duration,
    max_wait: Duration,
}

impl std::fmt::Debug for JobOutputTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobOutputTool").finish_non_exhaustive()
    }
}

impl JobOutputTool {
    /// The tool; `wait: true` blocks `default_wait` unless `timeout_ms` says otherwise (capped
    /// at `max_wait`).
    pub fn new(jobs: Arc<dyn Jobs>, default_wait: Duration, max_wait: Duration) -> Self {
        Self {
            jobs,
            default_wait,
            max_wait,
            parameters: json!({
                "type": "object",
                "properties": {
                    "job_id": {"type": "string"},
                    "wait": {"type": "boolean", "description": "Default false."},
                    "timeout_ms": {"type": "number", "description": "Milliseconds."}
                },
                "required": ["job_id"]
            }),
        }
    }
}

impl Tool for JobOutputTool {
    fn name(&self) -> &str {
        "job_output"
    }

    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        display(call)
    }

    fn description(&self) -> &str {
        "A background job's new output, or its result once finished; ends with `[status: \
         <status>]`. `wait` blocks until it finishes (up to `timeout_ms`). Do not poll: you are \
         told when a job ends."
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
            let mut a = JobArgs::parse(args)?;
            let id = a.job_id()?;
            let wait = a.wait.unwrap_or(false);
            let timeout = match a.timeout_ms {
                None => self.default_wait,
                Some(n) => match n.as_f64() {
                    Some(ms) if ms >= 0.0 && ms.is_finite() => {
                        Duration::from_millis(ms as u64).min(self.max_wait)
                    }
                    _ => {
                        return Err(ToolError::invalid_args(format!(
                            "invalid timeout_ms: expected a non-negative number, got {}",
                            Value::Number(n)
                        )));
                    }
                },
            };
            let text = self
                .jobs
                .output(
                    ctx.session_id(),
                    &id,
                    wait.then_some(timeout),
                    ctx.cancel_token().clone(),
                )
                .await
                .map_err(|e| ToolError::failed(e.to_string()))?;
            Ok(ToolOutput::text(text))
        })
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.max_wait + Duration::from_secs(30))
    }

    fn concurrency(&self, _args: &Value) -> Concurrency {
        Concurrency::ParallelSafe
    }

    fn read_only(&self) -> bool {
        true
    }
}

/// `job_list()`.
pub struct JobListTool {
    jobs: Arc<dyn Jobs>,
    parameters: Value,
}

impl std::fmt::Debug for JobListTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobListTool").finish_non_exhaustive()
    }
}

impl JobListTool {
    /// The tool.
    pub fn new(jobs: Arc<dyn Jobs>) -> Self {
        Self {
            jobs,
            parameters: json!({"type": "object", "properties": {}}),
        }
    }
}

impl Tool for JobListTool {
    fn name(&self) -> &str {
        "job_list"
    }

    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        display(call)
    }

    fn description(&self) -> &str {
        "List this session's background jobs with their status."
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execute<'a>(
        &'a self,
        ctx: ToolContext,
        _args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let jobs = self.jobs.list(ctx.session_id());
            if jobs.is_empty() {
                return Ok(ToolOutput::text("(no background jobs)"));
            }
            let lines: Vec<String> = jobs
                .iter()
                .map(|j| format!("{} [{}] {} \u{2014} {}", j.id, j.kind, j.status, j.label))
                .collect();
            Ok(ToolOutput::text(lines.join("\n")))
        })
    }

    fn concurrency(&self, _args: &Value) -> Concurrency {
        Concurrency::ParallelSafe
    }

    fn read_only(&self) -> bool {
        true
    }
}

/// `job_kill(job_id, reason?)`.
pub struct JobKillTool {
    jobs: Arc<dyn Jobs>,
    parameters: Value,
}

impl std::fmt::Debug for JobKillTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobKillTool").finish_non_exhaustive()
    }
}

impl JobKillTool {
    /// The tool.
    pub fn new(jobs: Arc<dyn Jobs>) -> Self {
        Self {
            jobs,
            parameters: json!({
                "type": "object",
                "properties": {
                    "job_id": {"type": "string"},
                    "reason": {"type": "string", "description": "Why (recorded with the job)."}
                },
                "required": ["job_id"]
            }),
        }
    }
}

impl Tool for JobKillTool {
    fn name(&self) -> &str {
        "job_kill"
    }

    fn display(&self, call: &DisplayInput<'_>) -> ToolDisplay {
        display(call)
    }

    fn description(&self) -> &str {
        "Cancel a background job."
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
            let mut a = JobArgs::parse(args)?;
            let id = a.job_id()?;
            let reason = a.reason.filter(|r| !r.is_empty());
            self.jobs
                .kill(ctx.session_id(), &id, reason)
                .map_err(|e| ToolError::failed(e.to_string()))?;
            Ok(ToolOutput::text(format!(
                "requested cancellation of job {id}"
            )))
        })
    }

    fn concurrency(&self, _args: &Value) -> Concurrency {
        Concurrency::ParallelSafe
    }
}
