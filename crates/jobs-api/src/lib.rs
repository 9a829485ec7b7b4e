//! The jobs seam of dsh: the [`Jobs`] kernel service (background work a session starts and
//! collects later), a job's spec, producer and report, a listing's [`JobInfo`] with its
//! [`JobState`], the service's errors and the settlement notice text. The implementation
//! (`LocalJobs`, the `job_*` tools) is `dsh-jobs`.

mod types;

pub use types::{
    JOBS_UNAVAILABLE, JobInfo, JobReport, JobSpec, JobState, JobsError, Producer, notice_text,
    started_text,
};

use std::time::Duration;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

/// The jobs service (kernel name `jobs`).
pub trait Jobs: Send + Sync + 'static {
    /// Starts `producer` as a job owned by `spec.owner`; returns its id at once.
    fn start(&self, spec: JobSpec, producer: Producer) -> Result<String, JobsError>;

    /// New output of job `id` for `caller` (or its final result once), always ending
    /// `[status: <s>]`; with `wait`, blocks up to that long for the job to settle (and stops
    /// waiting when `cancel` fires).
    fn output(
        &self,
        caller: &str,
        id: &str,
        wait: Option<Duration>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<String, JobsError>>;

    /// The jobs `caller` owns, oldest first.
    fn list(&self, caller: &str) -> Vec<JobInfo>;

    /// Requests cancellation of job `id` (its status becomes `stopping`, then `killed`).
    fn kill(&self, caller: &str, id: &str, reason: Option<String>) -> Result<(), JobsError>;

    /// The ids of `owner`'s jobs that have not settled.
    fn running(&self, owner: &str) -> Vec<String>;

    /// Resolves when `owner` has no unsettled job (each settled job's notice, if any, is
    /// already in the owner's inbox then).
    fn when_settled(&self, owner: &str) -> BoxFuture<'static, ()>;

    /// Settles `owner`'s unsettled jobs now with cause `teardown` (status `killed`) and
    /// cancels them. The `jobs` plugin calls it when an owner's teardown begins
    /// (`agent/disposing`), while its session is still open.
    fn teardown(&self, owner: &str);
}

impl dsh_kernel::Service for dyn Jobs {
    const NAME: &'static str = "jobs";
}
