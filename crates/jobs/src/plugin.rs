//! The `jobs` and `tool-jobs` plugins.

use std::sync::Arc;
use std::time::Duration;

use dsh_agent::Agents;
use dsh_kernel::{BoxError, Ctx, Dep, Plugin};
use dsh_tools::Tools;
use serde::Deserialize;

use crate::{JobKillTool, JobListTool, JobOutputTool, Jobs, LocalJobs};

/// When a settled job tells its owner.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CompletionDelivery {
    /// A notice: a new turn for an idle owner, a steer for a busy one.
    #[default]
    Wakeup,
    /// Nothing: the owner collects with `job_output`.
    Quiet,
}

/// Config of the `jobs` plugin.
#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JobsConfig {
    /// `wakeup` (default) or `quiet`.
    #[serde(default)]
    pub completion_delivery: CompletionDelivery,
}

/// Config of the `tool-jobs` plugin.
#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ToolJobsConfig {
    /// `job_output`'s wait when `timeout_ms` is absent, in milliseconds (default 30000).
    #[serde(default)]
    pub wait_timeout_ms: Option<u64>,
    /// The cap on `timeout_ms` (default 600000).
    #[serde(default)]
    pub max_wait_timeout_ms: Option<u64>,
}

/// Provides the in-process `jobs` service.
#[derive(Debug)]
pub struct JobsPlugin;

impl Plugin for JobsPlugin {
    const NAME: &'static str = "jobs";
    type Config = JobsConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Agents>()]
    }

    async fn apply(ctx: Ctx, config: JobsConfig) -> Result<(), BoxError> {
        let jobs = LocalJobs::new(
            ctx.clone(),
            config.completion_delivery == CompletionDelivery::Wakeup,
        );
        // An owner's teardown settles its running jobs (cause `teardown`) while its session
        // is still open.
        let j = jobs.clone();
        ctx.on::<dsh_agent::events::AgentDisposing>(move |ev| {
            j.teardown(&ev.agent_id);
            Ok(())
        })?;
        let service: Arc<dyn Jobs> = Arc::new(jobs);
        ctx.provide::<dyn Jobs>(service)?;
        Ok(())
    }
}

/// Registers `job_output`, `job_list` and `job_kill` while a `jobs` service exists.
#[derive(Debug)]
pub struct ToolJobsPlugin;

impl Plugin for ToolJobsPlugin {
    const NAME: &'static str = "tool-jobs";
    type Config = ToolJobsConfig;

    fn deps() -> Vec<Dep> {
        vec![Dep::on::<dyn Tools>(), Dep::on::<dyn Jobs>()]
    }

    async fn apply(ctx: Ctx, config: ToolJobsConfig) -> Result<(), BoxError> {
        let tools = ctx.dep::<dyn Tools>()?;
        let jobs = ctx.dep::<dyn Jobs>()?;
        tools.register(
            &ctx,
            Arc::new(JobOutputTool::new(
                jobs.clone(),
                Duration::from_millis(config.wait_timeout_ms.unwrap_or(30_000)),
                Duration::from_millis(config.max_wait_timeout_ms.unwrap_or(600_000)),
            )),
        )?;
        tools.register(&ctx, Arc::new(JobListTool::new(jobs.clone())))?;
        tools.register(&ctx, Arc::new(JobKillTool::new(jobs)))?;
        Ok(())
    }
}
