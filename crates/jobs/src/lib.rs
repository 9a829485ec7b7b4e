//! `dsh-jobs`: background work an agent starts and collects later.
//!
//! - [`Jobs`] (kernel service `jobs`): [`Jobs::start`] runs a producer future as job
//!   `<kind>-<16 hex>` owned by a session, logging `job/registered` in it; the producer's
//!   [`JobReport`] (or a kill, or teardown) settles the job once, logging `job/settled`.
//!   [`Jobs::output`], [`Jobs::list`] and [`Jobs::kill`] serve the tools, fenced by owner.
//! - Settlement notice to the owner agent (`background job <id> (<kind>: <label>) finished
//!   [status: …]. Read its output with job_output.`): an idle owner gets a new turn, a busy one
//!   a steer. No notice after a kill, or when a `job_output` call collects the result.
//! - Tools ([`ToolJobsPlugin`], plugin `tool-jobs`): `job_output(job_id, wait?, timeout_ms?)`,
//!   `job_list()`, `job_kill(job_id, reason?)`, with the original's texts.

mod local;
mod plugin;
mod tools;

/// The seam's vocabulary, owned by `dsh-jobs-api` (re-exported for the composition root).
pub use dsh_jobs_api::{
    JobInfo, JobReport, JobSpec, JobState, Jobs, JobsError, Producer, notice_text,
};
pub use local::{LocalJobs, TEARDOWN_DETAIL};
pub use plugin::{CompletionDelivery, JobsConfig, JobsPlugin, ToolJobsConfig, ToolJobsPlugin};
pub use tools::{JobKillTool, JobListTool, JobOutputTool};
