//! The jobs vocabulary.

use dsh_session::feature::JobToolCall;
use dsh_session::wire::JobStatus;
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

/// What a job is.
#[derive(Clone, Debug)]
pub struct JobSpec {
    /// The owning session (= agent id).
    pub owner: String,
    /// The producer kind: `subagent`, `bash`, …
    pub kind: String,
    /// A label for listings.
    pub label: String,
    /// The tool call that started it.
    pub tool_call: Option<JobToolCall>,
}

/// How a producer ended.
#[derive(Clone, Debug, PartialEq)]
pub struct JobReport {
    /// `Completed` or `Failed` (a producer that stops on its token may report `Killed`).
    pub status: JobStatus,
    /// The result text (`job_output` returns it once).
    pub output: String,
    /// E.g. `exit code: 0`.
    pub detail: Option<String>,
}

/// The work of a job: called once with the job's cancellation token.
pub type Producer = Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, JobReport> + Send>;

/// A job as listed.
#[derive(Clone, Debug, PartialEq)]
pub struct JobInfo {
    /// `<kind>-<16 hex>`.
    pub id: String,
    /// The producer kind.
    pub kind: String,
    /// `running`, `stopping`, `completed`, `killed` or `failed`.
    pub status: String,
    /// The label.
    pub label: String,
}

/// Errors of the jobs service (model-visible through the tools).
#[derive(Debug, thiserror::Error)]
pub enum JobsError {
    /// No such job.
    #[error("no job {0}")]
    NotFound(String),
    /// The caller does not own the job.
    #[error("job {0} belongs to another session")]
    NotOwner(String),
    /// The owner session is not live here.
    #[error("session {0} is not live; cannot start a background job")]
    OwnerUnavailable(String),
    /// The service is shutting down.
    #[error("background jobs are shutting down")]
    ShuttingDown,
}

/// `background job <id> (<kind>: <label>) finished [status: <s>]. Read its output with
/// job_output.`
pub fn notice_text(id: &str, kind: &str, label: &str, status: &str) -> String {
    format!(
        "background job {id} ({kind}: {label}) finished [status: {status}]. Read its output with job_output."
    )
}
