//! The jobs vocabulary.

use dsh_session::feature::JobToolCall;
use dsh_session::wire::JobStatus;
use futures::future::BoxFuture;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
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

impl JobSpec {
    /// The job tool call `call_id` of session `owner` starts (the call is its own root).
    pub fn for_tool_call(
        owner: impl Into<String>,
        kind: impl Into<String>,
        label: impl Into<String>,
        call_id: &str,
    ) -> Self {
        Self {
            owner: owner.into(),
            kind: kind.into(),
            label: label.into(),
            tool_call: Some(JobToolCall {
                call_id: call_id.to_owned(),
                root_call_id: call_id.to_owned(),
            }),
        }
    }
}

/// The error text of a tool asked to run in the background when no jobs service is mounted.
pub const JOBS_UNAVAILABLE: &str = "background jobs unavailable: load the jobs plugin";

/// The result text of a tool call that started job `id` of `kind`:
/// `started background <kind> job <id>` (the original's, e.g. for `subagent`).
pub fn started_text(kind: &str, id: &str) -> String {
    format!("started background {kind} job {id}")
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
    /// Running, stopping, or how it ended.
    pub status: JobState,
    /// The label.
    pub label: String,
}

/// The state of a job as listed: its wire string is `running`, `stopping`, or the
/// `job/settled` status (`completed`, `killed`, `failed`, or a value another writer logged).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum JobState {
    /// The producer is running.
    Running,
    /// A kill was requested; the producer has not stopped yet.
    Stopping,
    /// Settled, with the status `job/settled` logged.
    Settled(JobStatus),
}

impl JobState {
    /// The wire string (`running`, `stopping`, `completed`, `killed`, `failed`).
    pub fn as_str(&self) -> &str {
        match self {
            JobState::Running => "running",
            JobState::Stopping => "stopping",
            JobState::Settled(s) => s.as_str(),
        }
    }

    /// The state of a wire string (the inverse of [`JobState::as_str`]).
    pub fn parse(s: &str) -> Self {
        match s {
            "running" => JobState::Running,
            "stopping" => JobState::Stopping,
            other => JobState::Settled(JobStatus::parse(other)),
        }
    }

    /// Whether the job has settled.
    pub fn is_settled(&self) -> bool {
        matches!(self, JobState::Settled(_))
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for JobState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for JobState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(JobState::parse(&String::deserialize(d)?))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_states_keep_their_wire_strings() {
        for (state, wire) in [
            (JobState::Running, "running"),
            (JobState::Stopping, "stopping"),
            (JobState::Settled(JobStatus::Completed), "completed"),
            (JobState::Settled(JobStatus::Killed), "killed"),
            (JobState::Settled(JobStatus::Failed), "failed"),
            (JobState::Settled(JobStatus::Unknown("lost".into())), "lost"),
        ] {
            assert_eq!(state.to_string(), wire);
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{wire}\""));
            assert_eq!(serde_json::from_str::<JobState>(&json).unwrap(), state);
        }
        assert!(!JobState::Stopping.is_settled());
        assert!(JobState::Settled(JobStatus::Failed).is_settled());
    }
}
